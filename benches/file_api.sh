#!/usr/bin/env bash
# The sandbox file API's speed targets (issue 17), against a release `trove serve` on this
# machine: small-file `POST /v1/file/read` under wrk (16 connections), the delay from a write
# to its watcher event with 10,000 files under watch (SSE, 300 writes), and a 1 GiB upload and
# download with the server's peak RSS. Usage: benches/file_api.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
. benches/server_env.sh

start() {
    rm -rf "$work/repo" "$work/workspaces"
    "$trove" --repo "$work/repo" init >/dev/null
    TROVE_API_TOKEN=$token "$trove" --repo "$work/repo" serve --listen "127.0.0.1:$port" \
        --workspaces "$work/workspaces" --upload-limit 2GiB --log-level warn >"$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && return; sleep 0.05; done
}
session() {
    curl -sf -X POST -H "Authorization: Bearer $token" -d '{"workspace": "bench", "persistent": true}' \
        "http://127.0.0.1:$port/v1/sessions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["session_token"])'
}

echo "== POST /v1/file/read, a 1 KiB file, wrk -t2 -c16 -d10s"
start
st=$(session)
mkdir -p "$work/workspaces/bench/src"
head -c 1024 /dev/zero | tr '\0' 'a' | fold -w 63 >"$work/workspaces/bench/src/small.txt"
cat >"$work/read.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"file": "/workspace/src/small.txt"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $st"
LUA
wrk -t2 -c16 -d10s --latency -s "$work/read.lua" "http://127.0.0.1:$port/v1/file/read" | \
    grep -E "Requests/sec|50%|99%|Non-2xx|errors"
cleanup

echo "== watcher delay, 10,000 files under watch"
start
st=$(session)
python3 - "$port" "$st" "$work/workspaces/bench" <<'PY'
import http.client, json, os, statistics, sys, threading, time
port, st, ws = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for d in range(100):
    os.makedirs(f"{ws}/d{d}", exist_ok=True)
    for f in range(100):
        with open(f"{ws}/d{d}/f{f}.txt", "w") as fh:
            fh.write("x\n")
h = {"Authorization": f"Bearer {st}", "Content-Type": "application/json"}
c = http.client.HTTPConnection("127.0.0.1", port)
c.request("POST", "/v1/file/watch", json.dumps({"path": "/workspace", "recursive": True}), h)
wid = json.loads(c.getresponse().read())["data"]["watcher_id"]
seen = {}
def follow():
    s = http.client.HTTPConnection("127.0.0.1", port)
    s.request("GET", f"/v1/file/watch/{wid}/events", headers=h)
    r = s.getresponse()
    for line in r:
        if line.startswith(b"data: {") and b'"relative_path"' in line:
            e = json.loads(line[6:])
            seen.setdefault(e["relative_path"], time.monotonic())
threading.Thread(target=follow, daemon=True).start()
time.sleep(0.5)
sent = {}
for i in range(300):
    p = f"d{i % 100}/new{i}.txt"
    sent[p] = time.monotonic()
    with open(f"{ws}/{p}", "w") as fh:
        fh.write("y\n")
    time.sleep(0.02)
time.sleep(1)
lat = sorted((seen[p] - t) * 1000 for p, t in sent.items() if p in seen)
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
print(f"events {len(lat)}/{len(sent)}  p50 {q(0.5):.2f} ms  p99 {q(0.99):.2f} ms  max {lat[-1]:.2f} ms")
PY
cleanup

echo "== 1 GiB upload and download"
start
st=$(session)
head -c $((1 << 30)) /dev/urandom >"$work/big.bin"
up=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $st" \
    -F "path=/workspace/big.bin" -F "file=@$work/big.bin" "http://127.0.0.1:$port/v1/file/upload")
down=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $st" \
    "http://127.0.0.1:$port/v1/file/download?path=/workspace/big.bin")
cmp "$work/big.bin" "$work/workspaces/bench/big.bin"
rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
python3 -c "import sys; up, down, rss = map(float, sys.argv[1:]); g = 1 << 30
print(f'upload {g / up / 1e6:.0f} MB/s ({up:.2f} s)  download {g / down / 1e6:.0f} MB/s ({down:.2f} s)  server peak RSS {rss / 1024:.1f} MiB')" \
    "$up" "$down" "$rss"
rm -f "$work/big.bin"
