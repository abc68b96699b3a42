#!/usr/bin/env bash
# The soak: a release `trove serve` under mixed load on loopback for a while (default 30
# minutes): reads, writes, edits, uploads, deletes and restores, watchers, MCP sessions,
# snapshots, sessions ending and starting, scheduled gc, and a few intended refusals. The
# server's RSS is sampled every 10 s; at the end `trove check --read-data` must be clean.
# Not part of CI; results go in RELIABILITY.md ("Soak").
#
#   bash benches/soak.sh [SECONDS] [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-1800}"
work="${2:-$(mktemp -d)}"
cargo build --release --quiet
bin="$PWD/target/release/trove"
source benches/server_env.sh
repo="$work/repo"
"$bin" --repo "$repo" init >/dev/null
TROVE_API_TOKEN="$token" "$bin" --repo "$repo" serve --listen "127.0.0.1:$port" \
  --workspaces "$work/workspaces" --maintenance-interval 120s --gc-grace 0s \
  --checkpoint-interval 30s --log-level warn >"$work/serve.out" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
python3 benches/soak.py --port "$port" --token "$token" --pid "$pid" --seconds "$seconds" \
  --workspaces "$work/workspaces" --out "$work/soak.json"
kill -TERM "$pid"; wait "$pid" || true; pid=
"$bin" --repo "$repo" check --read-data --json >"$work/check.json"
python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
soak = json.load(open(f"{work}/soak.json"))
check = json.load(open(f"{work}/check.json"))
print(json.dumps({"soak": soak, "check_problems": len(check.get("problems", [])), "check": {k: v for k, v in check.items() if k != "problems"}}, indent=1))
EOF
echo "server log: $work/serve.log ($(wc -l <"$work/serve.log") lines)"
