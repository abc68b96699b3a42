#!/usr/bin/env bash
# Agent churn and the repository's size (issue 18, tenth stop): each round appends a line to a
# share of the tree's files under 256 KiB (the ones that go into bundles), snapshots, forgets
# past keep-last 3 and collects (`gc --grace 0s`). Prints the repository's size (du, KiB) and the
# collection's wall time per round, for this build and, if given, a second build run on the same
# sequence of trees right after it in each round.
#
# Usage: benches/gc_churn.sh TREE ROUNDS PER_MILLE [OTHER_TROVE]
# e.g.   benches/gc_churn.sh ../shared/bench/ws/npm 20 50 /path/to/older/trove
# TREE is copied into a temporary directory (TMPDIR) first; the copy is what changes.
set -euo pipefail
TROVE=${TROVE:-$(cd "$(dirname "$0")/.." && pwd)/target/release/trove}
[ -x "$TROVE" ] || { echo "needs $TROVE: cargo build --release" >&2; exit 2; }
tree=$1 rounds=$2 share=$3 other=${4:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -a "$tree" "$dir/ws"
builds=(this); [ -n "$other" ] && builds+=(other)
bin() { if [ "$1" = this ]; then echo "$TROVE"; else echo "$other"; fi; }
for b in "${builds[@]}"; do "$(bin "$b")" init --repo "$dir/$b" > /dev/null; done
find "$dir/ws" -type f -size -256k | sort > "$dir/files"
echo "$(wc -l < "$dir/files") files under 256 KiB; $share per mille of them changed per round"
echo "round ${builds[*]/%/_kib} ${builds[*]/%/_gc_s}"
for r in $(seq 0 "$rounds"); do
  if [ "$r" -gt 0 ]; then
    python3 - "$dir/files" "$share" "$r" <<'PY'
import random, sys
files = open(sys.argv[1]).read().split("\n")[:-1]
random.seed(int(sys.argv[3]))
for f in random.sample(files, len(files) * int(sys.argv[2]) // 1000):
    with open(f, "a") as h:
        h.write("\n// changed in round %s\n" % sys.argv[3])
PY
  fi
  sizes="" times=""
  for b in "${builds[@]}"; do
    t=$(bin "$b")
    "$t" snapshot --repo "$dir/$b" --no-default-excludes --workspace w "$dir/ws" > /dev/null
    [ "$r" -eq 0 ] && "$t" workspace retention --repo "$dir/$b" w --keep-last 3 > /dev/null
    "$t" forget --repo "$dir/$b" > /dev/null
    start=$(date +%s.%N)
    "$t" gc --repo "$dir/$b" --grace 0s > /dev/null
    end=$(date +%s.%N)
    sizes="$sizes $(du -sk "$dir/$b" | cut -f1)"
    times="$times $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$start" "$end")"
  done
  echo "$r$sizes$times"
done
for b in "${builds[@]}"; do "$(bin "$b")" check --repo "$dir/$b" --read-data | tail -1; done
