#!/usr/bin/env bash
# The soak: a release `trove serve` under mixed load on loopback for a while (default 30
# minutes): reads, writes, edits, uploads, deletes and restores, watchers, MCP sessions,
# snapshots, sessions ending and starting, scheduled gc, and a few intended refusals. The
# server's RSS is sampled every 10 s; at the end `trove check --read-data` must be clean.
# Not part of CI; results go in RELIABILITY.md ("Soak").
#
# With --bucket, the repository is in a bucket on moto's S3 server (started here) and the
# server is one host of two: a second host (a cache directory of its own) snapshots a tree and
# collects garbage in a loop beside it, with a grace period of 30 s (the server's maintenance
# too: with none, every operation in flight on the other host would be refused). At the end a
# third host, with no cache, checks the bucket with --read-data and verifies the audit log.
#
#   bash benches/soak.sh [--bucket] [SECONDS] [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bucket=
if [ "${1:-}" = --bucket ]; then bucket=1; shift; fi
seconds="${1:-1800}"
work="${2:-$(mktemp -d)}"
cargo build --release --quiet
bin="$PWD/target/release/trove"
source benches/server_env.sh
grace=0s
if [ -n "$bucket" ]; then
  source benches/moto.sh
  start_moto "$work"
  curl -sf -X PUT "$AWS_ENDPOINT_URL/soak" >/dev/null
  export TROVE_REPO=s3://soak/repo TROVE_PASSWORD=soak
  repo=$TROVE_REPO grace=30s
  at() { echo --cache-dir "$work/host-$1"; }
else
  repo="$work/repo"
  at() { echo --repo "$repo"; }
fi
# `host NAME ARGS...`: trove as host NAME (in a directory, every host is the one repository).
host() { "$bin" $(at "$1") "${@:2}"; }
host a init >/dev/null
# Started directly, not through `host`, so that $! is the server's pid (its memory is sampled).
TROVE_API_TOKEN="$token" "$bin" $(at a) serve --listen "127.0.0.1:$port" \
  --workspaces "$work/workspaces" --maintenance-interval 120s --gc-grace "$grace" \
  --checkpoint-interval 30s --log-level warn >"$work/serve.out" 2>"$work/serve.log" &
pid=$!
other=
if [ -n "$bucket" ]; then
  # The second host: a snapshot of a tree it changes, then a collection, every few seconds.
  mkdir -p "$work/other"
  (
    round=0
    while :; do
      head -c $((20000 + round % 7 * 5000)) /dev/urandom >"$work/other/f$((round % 11)).bin"
      host b snapshot "$work/other" --workspace other >/dev/null 2>>"$work/other.log" || echo "snapshot $round failed" >>"$work/other.log"
      if [ $((round % 5)) = 4 ]; then
        host b gc --grace 30s >/dev/null 2>>"$work/other.log" || echo "gc $round failed" >>"$work/other.log"
      fi
      round=$((round + 1))
      echo "$round" >"$work/other.rounds"
      sleep 2
    done
  ) &
  other=$!
fi
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
python3 benches/soak.py --port "$port" --token "$token" --pid "$pid" --seconds "$seconds" \
  --workspaces "$work/workspaces" --out "$work/soak.json"
kill -TERM "$pid"; wait "$pid" || true; pid=
if [ -n "$other" ]; then kill "$other"; wait "$other" 2>/dev/null || true; fi
host c check --read-data --json >"$work/check.json"
if [ -n "$bucket" ]; then
  host c audit verify --json >"$work/verify.json"
  echo "second host: $(cat "$work/other.rounds") rounds, $(grep -c failed "$work/other.log" || true) failed (log: $work/other.log)"
fi
python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
soak = json.load(open(f"{work}/soak.json"))
check = json.load(open(f"{work}/check.json"))
print(json.dumps({"soak": soak, "check_problems": len(check.get("problems", [])), "check": {k: v for k, v in check.items() if k != "problems"}}, indent=1))
EOF
echo "server log: $work/serve.log ($(wc -l <"$work/serve.log") lines)"
