#!/usr/bin/env bash
# Peak resident memory of a cold snapshot (issue 18, item 4: flat in tree size), beside
# `tar | zstd -3 -T0` of the same tree. Each tree is snapshotted ROUNDS times into a fresh
# repository with every file stored (`--no-default-excludes`, as tar stores them); the kernel's
# peak (`/usr/bin/time -f %M`, KiB) is quoted as min / median / max.
#
# Usage: benches/snapshot_memory.sh [ROUNDS] DIR...   (release build; GNU time; zstd)
#   e.g. benches/snapshot_memory.sh 5 ../shared/bench/ws/npm /tmp/ws100k
# A 100,000-file tree: ../shared/bench/make-synthetic-ws.py DIR --files 100000
set -euo pipefail
TROVE=${TROVE:-$(cd "$(dirname "$0")/.." && pwd)/target/release/trove}
rounds=5
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [ROUNDS] DIR..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stats() { sort -n | awk '{v[NR]=$1} END {printf "%d / %d / %d KiB (%.1f MiB median)", v[1], v[int((NR+1)/2)], v[NR], v[int((NR+1)/2)]/1024}'; }
for dir in "$@"; do
  files=$(find "$dir" -type f | wc -l)
  : >"$work/trove" && : >"$work/tar"
  for _ in $(seq "$rounds"); do
    rm -rf "$work/repo" "$work/out.tar.zst"
    "$TROVE" --repo "$work/repo" init >/dev/null
    /usr/bin/time -f %M -a -o "$work/trove" "$TROVE" --repo "$work/repo" snapshot --no-default-excludes --workspace bench "$dir" >/dev/null
    /usr/bin/time -f %M -a -o "$work/tar" sh -c "tar -cf - -C '$dir' . | zstd -3 -T0 -q -o '$work/out.tar.zst'"
  done
  echo "$dir ($files files): trove $(stats <"$work/trove"); tar|zstd (its largest process) $(stats <"$work/tar")"
done
