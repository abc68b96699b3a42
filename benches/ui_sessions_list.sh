#!/usr/bin/env bash
# The review pages' sessions list over many ended sessions: a release `trove serve`, SESSIONS
# sessions each on a workspace of its own of 40 small text files, 20 of them edited and 2 added
# during the session, each ended (its final snapshot); then `/ui/sessions?status=ended` loaded
# ROUNDS times, each answer's `Server-Timing` printed: the first load counts every session's
# totals (both versions of every changed file read), the later ones take an ended session's
# totals from what the server kept.
# Usage: benches/ui_sessions_list.sh [SESSIONS] [ROUNDS] [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-100}
rounds=${2:-11}
work=${3:-$(mktemp -d)}
. benches/server_env.sh
rm -rf "$work/repo" "$work/workspaces"
"$trove" --repo "$work/repo" init >/dev/null
python3 - "$work/workspaces" "$sessions" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for s in range(n):
    for i in range(40):
        d = os.path.join(root, f"w{s:03}", f"d{i // 10}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:02}.txt"), "w") as f:
            f.write("".join(f"line {j} of file {i} in workspace {s}\n" for j in range(200)))
PY
start_server
auth="Authorization: Bearer $token"
for s in $(seq -f "%03g" 0 $((sessions - 1))); do
    id=$(new_session "w$s")
    python3 - "$work/workspaces/w$s" <<'PY'
import sys
root = sys.argv[1]
for i in range(20):
    p = f"{root}/d{i // 10}/f{i:02}.txt"
    lines = open(p).read().splitlines(True)
    lines[100] = "an edited line\n"
    open(p, "w").write("".join(lines))
for i in range(2):
    open(f"{root}/new{i}.txt", "w").write("a new file\n" * 50)
PY
    curl -sf -X DELETE -H "$auth" "http://127.0.0.1:$port/v1/sessions/$id" >/dev/null
done
cookie=$(curl -s -i -X POST -d "token=$token" "http://127.0.0.1:$port/ui/login" |
    sed -n 's/^set-cookie: trove_ui=\([0-9a-f]*\);.*/\1/p')
url="http://127.0.0.1:$port/ui/sessions?status=ended"
ms=()
for _ in $(seq "$rounds"); do
    ms+=("$(curl -s -o /dev/null -D - -b "trove_ui=$cookie" "$url" | sed -n 's/^server-timing: total;dur=\([0-9.]*\).*/\1/p')")
done
echo "/ui/sessions?status=ended, $sessions ended sessions (ms): ${ms[*]}"
echo "  first load ${ms[0]} ms; later loads' median $(printf '%s\n' "${ms[@]:1}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ms"
