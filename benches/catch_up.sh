#!/usr/bin/env bash
# How fast a host catches up with a bucket's record log it is far behind: one repository on
# moto's S3 server (the tests' own, under target/) gets SEGMENTS writes (a session's `trove tool
# create_file` calls, one segment each, and no copy of a replica), then `trove snapshots` on a
# host with an empty cache directory (which replays every segment) is timed with two builds,
# alternating, ROUNDS times; the median of the pair-by-pair ratios (B / A) is printed. With
# LATENCY_MS, the timed hosts reach the store through benches/latency_proxy.py, which holds each
# chunk that long each way (a round trip of twice that, as to a store across a network).
#
# Usage: TROVE_A=path [TROVE_B=path] [LATENCY_MS=10] benches/catch_up.sh [SEGMENTS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SEGMENTS=${1:-600}
ROUNDS=${2:-7}
A=${TROVE_A:?the first build to time (e.g. of the commit before)}
B=${TROVE_B:-$PWD/target/release/trove}
WORK=$(mktemp -d /tmp/catchup.XXXX)

. benches/moto.sh
start_moto "$WORK"
trap 'exec 3>&-; rm -rf "$WORK"' EXIT
export TROVE_PASSWORD=bench TROVE_LOG_COPY_EVERY=0 TROVE_REPO=s3://catchup/repo
curl -s -X PUT "$AWS_ENDPOINT_URL/catchup" > /dev/null
mkdir -p "$WORK/ws"
"$A" --cache-dir "$WORK/writer" init > /dev/null
sid=$("$A" --cache-dir "$WORK/writer" --json session create --dir "$WORK/ws" --workspace w --persistent --ttl 86400 \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
for i in $(seq "$SEGMENTS"); do
  "$A" --cache-dir "$WORK/writer" tool create_file --session "$sid" "{\"path\": \"f$i.txt\", \"content\": \"$i\"}" > /dev/null
done
echo "log: $(curl -s "$AWS_ENDPOINT_URL/catchup?list-type=2&prefix=repo/log/" | grep -o '<Key>' | wc -l) segments listed (the listing stops at 1,000)"

if [ -n "${LATENCY_MS:-}" ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 benches/latency_proxy.py "$port" 127.0.0.1 "${AWS_ENDPOINT_URL##*:}" "$LATENCY_MS" > "$WORK/proxy.out" 2>&1 &
  proxy=$!
  trap 'kill $proxy; exec 3>&-; rm -rf "$WORK"' EXIT
  for _ in $(seq 100); do grep -q ready "$WORK/proxy.out" 2>/dev/null && break; sleep 0.05; done
  export AWS_ENDPOINT_URL=http://127.0.0.1:$port
  echo "the timed hosts reach the store with $LATENCY_MS ms each way"
fi

python3 - "$A" "$B" "$ROUNDS" "$WORK" <<'EOF'
import os, shutil, statistics, subprocess, sys, time
a, b, rounds, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def run(binary):
    cache = os.path.join(work, "reader")
    shutil.rmtree(cache, ignore_errors=True)
    t = time.monotonic()
    subprocess.run([binary, "--cache-dir", cache, "snapshots"], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t
ta, tb, ratios = [], [], []
for r in range(rounds):
    # Alternate which goes first.
    if r % 2 == 0:
        x = run(a); y = run(b)
    else:
        y = run(b); x = run(a)
    ta.append(x); tb.append(y); ratios.append(y / x)
    print("pair %d: A %.2f s, B %.2f s, B/A %.3f" % (r + 1, x, y, y / x))
print("A: median %.2f s (%.2f-%.2f); B: median %.2f s (%.2f-%.2f); B/A median of pairs %.3f (%.3f-%.3f)" % (
    statistics.median(ta), min(ta), max(ta), statistics.median(tb), min(tb), max(tb),
    statistics.median(ratios), min(ratios), max(ratios)))
EOF
