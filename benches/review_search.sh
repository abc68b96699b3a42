#!/usr/bin/env bash
# `trove grep` over a 200 MB snapshot against ripgrep over the same files on disk, the two
# run alternately (pair by pair), printing each pair's ratio and the median of the ratios.
#
# Usage: benches/review_search.sh [RUNS]   (default 11 pairs; needs a release build and `rg`:
#        `cargo build --release`, and `pip install ripgrep` or `cargo install ripgrep`)
# The workspace (4,000 files of about 50 KiB of text, every line different, 8 holding the needle) and the
# repository go to a temporary directory on the disk TMPDIR points at. The first search of the
# snapshot builds its search index and is timed on its own. The page cache is warm
# (one untimed run of each first), as for any repeated search.
set -euo pipefail
RUNS=${1:-11}
TROVE=${TROVE:-$(dirname "$0")/../target/release/trove}
command -v rg >/dev/null || { echo "needs ripgrep: pip install ripgrep (or cargo install ripgrep)" >&2; exit 2; }
[ -x "$TROVE" ] || { echo "needs $TROVE: cargo build --release" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir/big" <<'PY'
import os, sys
root = sys.argv[1]
for i in range(4000):
    body = "".join("let value_%d_%d = compute(alpha%d, beta, %d); // source text\n" % (i, n, n, i * n) for n in range(730))
    d = os.path.join(root, "d%02d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    needle = "fn needle_%d() {}\n" % i if i % 500 == 0 else ""
    with open(os.path.join(d, "f%04d.rs" % i), "w") as f:
        f.write(body + needle)
PY
"$TROVE" --repo "$dir/repo" init >/dev/null
"$TROVE" --repo "$dir/repo" snapshot "$dir/big" --workspace big >/dev/null
du -sh "$dir/big" | cut -f1 | sed 's/^/workspace: /'
# The snapshot's first content search builds its search index: timed once, on its own.
python3 -c 'import subprocess,sys,time; t=time.perf_counter(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); print(f"first search (builds the index): {(time.perf_counter()-t)*1000:.0f} ms")' \
  "$TROVE" --repo "$dir/repo" grep latest --workspace big 'fn needle_\d+'
# Two patterns: a selective one (8 files hold it; the search index rules out the rest) and a
# broad one (one line of every file: every file is decompressed and searched).
for PATTERN in 'fn needle_\d+' 'value_\d+_729 '; do
echo "pattern: $PATTERN"
TROVE_CMD=("$TROVE" --repo "$dir/repo" grep latest --workspace big --max-results 100000 "$PATTERN")
RG_CMD=(rg --no-ignore --hidden "$PATTERN" "$dir/big")
[ "$("${TROVE_CMD[@]}" | grep -c .)" = "$("${RG_CMD[@]}" | grep -c .)" ] || { echo "the two disagree on the matches" >&2; exit 1; }
# Wall time of each run by a microsecond clock (a 10 ms timer cannot tell these apart); one
# untimed run of each first, then pairs, the order inside a pair alternating. The check above
# was the snapshot's first search, which built its search index (timed separately below).
python3 - "$RUNS" "${#TROVE_CMD[@]}" "${TROVE_CMD[@]}" "${RG_CMD[@]}" <<'PY2'
import statistics, subprocess, sys, time
runs, n = int(sys.argv[1]), int(sys.argv[2])
trove, rg = sys.argv[3:3 + n], sys.argv[3 + n:]
def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t
timed(trove); timed(rg)
ratios = []
for i in range(runs):
    if i % 2 == 0:
        a = timed(trove); b = timed(rg)
    else:
        b = timed(rg); a = timed(trove)
    ratios.append(a / b)
    print(f"pair {i + 1}: trove {a * 1000:.1f} ms  rg {b * 1000:.1f} ms  ratio {a / b:.3f}")
print(f"median ratio trove/rg: {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}) over {runs} pairs")
PY2
done
