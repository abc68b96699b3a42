#!/usr/bin/env bash
# Small-file reads over HTTP from a session's latest snapshot against the same reads from its
# live tree (issue 18's serving goal: >= 0.8 of live, p99 < 5 ms), against a release
# `trove serve` on this machine: wrk -t2 -c16, 10 s a run, the two sources alternating run by
# run (ROUNDS pairs), each pair's ratio printed and their median.
# Usage: benches/serving_http.sh TREE [FILE] [ROUNDS] [WORKDIR]
#   TREE  a directory copied in as the session's workspace (e.g. the npm bench workspace)
#   FILE  a small file inside it, relative (default: the first file of about 1 KiB found)
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:?usage: serving_http.sh TREE [FILE] [ROUNDS] [WORKDIR]}
file=${2:-$(cd "$tree" && find . -type f -size -2k -size +500c | sed 's|^\./||' | sort | awk 'NR == 1')}
rounds=${3:-3}
work=${4:-$(mktemp -d)}
. benches/server_env.sh
rm -rf "$work/repo" "$work/workspaces"
mkdir -p "$work/workspaces"
cp -a "$tree" "$work/workspaces/bench"
"$trove" --repo "$work/repo" init >/dev/null
start_server
auth="Authorization: Bearer $token"
id=$(new_session bench)
curl -sf -X POST -H "$auth" "http://127.0.0.1:$port/v1/sessions/$id/snapshots" >/dev/null
echo "file: $file ($(stat -c %s "$tree/$file") bytes), session $id"
cat >"$work/auth.lua" <<LUA
wrk.headers["Authorization"] = "Bearer $token"
LUA
run() { # source -> "req/s p50 p99"
    wrk -t2 -c16 -d10s --latency -s "$work/auth.lua" \
        "http://127.0.0.1:$port/api/sessions/$id/files/$file?source=$1" |
        awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$NF} END {print r, p50, p99, (bad ? "non-2xx " bad : "")}'
}
for src in latest live; do curl -sf -H "$auth" "http://127.0.0.1:$port/api/sessions/$id/files/$file?source=$src" >/dev/null; done
ratios=()
for i in $(seq "$rounds"); do
    snap=$(run latest)
    live=$(run live)
    ratio=$(python3 -c "print(round(${snap%% *} / ${live%% *}, 3))")
    ratios+=("$ratio")
    echo "pair $i: latest $snap | live $live | ratio $ratio"
done
python3 -c "import statistics, sys; r = [float(x) for x in sys.argv[1:]]; print('median ratio latest/live', statistics.median(r), 'min', min(r), 'max', max(r))" "${ratios[@]}"
echo "server peak RSS: $(grep VmHWM /proc/$pid/status | awk '{print $2, $3}')"
