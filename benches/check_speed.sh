#!/usr/bin/env bash
# `trove check --read-data` throughput against zstd's own single-thread decompression of the
# same compressed bytes (issue 16: at least 80% of zstd's speed per core). The read phase is
# the --read-data run less a metadata-only run of the same repository; both commands run
# alternately, five pairs, medians quoted.
#
# Usage: benches/check_speed.sh REPO   (a repository with real content; release build; zstd)
set -euo pipefail
TROVE=${TROVE:-$(cd "$(dirname "$0")/.." && pwd)/target/release/trove}
repo=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The zstd frames of every blob in the packs (a blob: 56-byte header, then the payload).
python3 - "$repo" "$work/frames.zst" <<'PY'
import os, struct, sys
repo, out = sys.argv[1], sys.argv[2]
with open(out, "wb") as o:
    for d, _, files in os.walk(os.path.join(repo, "packs")):
        for f in files:
            if not f.endswith(".pack"):
                continue
            b = open(os.path.join(d, f), "rb").read()
            at = 8
            while at + 56 <= len(b):
                payload = struct.unpack_from("<Q", b, at + 16)[0]
                if b[at + 5] == 1:
                    o.write(b[at + 56: at + 56 + payload])
                at += 56 + payload
PY
python3 - "$TROVE" "$repo" "$work/frames.zst" "$(nproc)" <<'PY'
import statistics, subprocess, sys, time
trove, repo, frames, cores = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
raw = len(subprocess.run(["zstd", "-dc", frames], capture_output=True, check=True).stdout)
def timed(cmd):
    t = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True); return time.perf_counter() - t
meta, full, z = [], [], []
for i in range(5):
    meta.append(timed([trove, "--repo", repo, "check"]))
    full.append(timed([trove, "--repo", repo, "check", "--read-data"]))
    z.append(timed(["zstd", "-dc", "-T1", frames]))
m, f, zz = statistics.median(meta), statistics.median(full), statistics.median(z)
read = f - m
zs, ts = raw / zz / 1e6, raw / read / 1e6
print(f"raw bytes {raw}; zstd -d one core {zz:.3f} s = {zs:.0f} MB/s")
print(f"check {m:.3f} s, check --read-data {f:.3f} s: read phase {read:.3f} s = {ts:.0f} MB/s on {cores} cores = {ts / cores:.0f} MB/s per core")
print(f"per core against zstd: {ts / cores / zs:.2f}")
PY
