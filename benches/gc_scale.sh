#!/usr/bin/env bash
# Garbage collection and check over a repository of about 1,000,000 objects (issue 16):
# ten snapshots of a 100,000-file workspace whose every file changes between them, then a
# policy keeping the last five, so half the objects become garbage. Times, with peak RSS:
# `trove check` (metadata), `trove gc --grace 0s` (two passes: condemn, then delete, and the
# packs rewritten), `trove check` again, and `trove check --read-data` against `zstd -d` of
# the same packs' bytes on one core.
#
# Usage: benches/gc_scale.sh [DIR]   (needs a release build: cargo build --release; zstd)
# DIR (default: a new temporary directory on the disk TMPDIR points at) keeps the workspace
# and the repository; an existing DIR/repo is reused as built.
set -euo pipefail
TROVE=${TROVE:-$(cd "$(dirname "$0")/.." && pwd)/target/release/trove}
[ -x "$TROVE" ] || { echo "needs $TROVE: cargo build --release" >&2; exit 2; }
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
export TROVE_REPO="$dir/repo"
timed() { # label, command...: wall seconds and peak RSS of one run
  local label=$1; shift
  /usr/bin/time -f "$label: %e s, %M KiB peak RSS" "$@" > "$dir/last.out" 2> "$dir/last.err" || { cat "$dir/last.err" >&2; return 1; }
  grep -F "$label:" "$dir/last.err"
}
if [ ! -d "$TROVE_REPO" ]; then
  "$TROVE" init > /dev/null
  for round in $(seq 0 9); do
    python3 - "$dir/ws" "$round" <<'PY'
import os, sys
root, r = sys.argv[1], int(sys.argv[2])
for i in range(100_000):
    d = os.path.join(root, "d%03d" % (i // 100))
    if r == 0 and i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d.txt" % i), "w") as f:
        f.write("round %d file %d: %s\n" % (r, i, "x" * (i % 97)))
PY
    "$TROVE" snapshot "$dir/ws" --workspace w > /dev/null
  done
  "$TROVE" workspace retention w --keep-last 5 > /dev/null
  "$TROVE" forget > /dev/null
fi
python3 - "$TROVE_REPO/manifest.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("objects %d, packs %d, trees %d, snapshots %d" % tuple(c.execute(q).fetchone()[0] for q in (
    "SELECT COUNT(*) FROM objects", "SELECT COUNT(*) FROM packs", "SELECT COUNT(*) FROM trees", "SELECT COUNT(*) FROM snapshots")))
PY
du -sh "$TROVE_REPO" | cut -f1 | sed 's/^/repository: /'
timed "check (metadata)" "$TROVE" check
timed "gc --grace 0s" "$TROVE" gc --grace 0s
cat "$dir/last.out"
timed "check (metadata), after gc" "$TROVE" check
du -sh "$TROVE_REPO" | cut -f1 | sed 's/^/repository after gc: /'
timed "check --read-data" "$TROVE" check --read-data
grep -o "[0-9]* objects read from [0-9]* packs ([^)]*)" "$dir/last.out" || true
# zstd's own decompression of the same blobs: the packs are blobs with 56-byte headers around
# zstd frames, so time `zstd -d` over the frames cut out of them (one core).
python3 - "$TROVE_REPO" "$dir/frames.zst" <<'PY'
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
                codec = b[at + 5]
                if codec == 1:
                    o.write(b[at + 56: at + 56 + payload])
                at += 56 + payload
PY
raw=$(zstd -dc "$dir/frames.zst" | wc -c)
start=$(date +%s.%N); zstd -dc -T1 "$dir/frames.zst" > /dev/null; end=$(date +%s.%N)
python3 -c "import sys; raw=int(sys.argv[1]); t=float(sys.argv[3])-float(sys.argv[2]); print(f'zstd -d, one core: {raw/t/1e6:.0f} MB/s ({raw} bytes in {t:.2f} s)')" "$raw" "$start" "$end"
