#!/usr/bin/env bash
# Repository bytes right after a cold snapshot of each tree given, against a `.tar.zst` of the
# same tree (`tar | zstd -3`), with the node-local cache's bytes beside them (it is not part of the
# repository: ARCHITECTURE.md, "Directory cache"). Prints one line per tree.
#
# Usage: benches/cold_size.sh TROVE_BINARY TREE [TREE...]
# (KEEP=1 keeps the work directory.)
set -euo pipefail
trove=$1
shift
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
kib() { du -sk --apparent-size "$1" | cut -f1; }
for tree in "$@"; do
    name=$(basename "$tree")
    repo=$work/$name-repo
    cache=$work/$name-cache
    "$trove" --repo "$repo" init >/dev/null
    TROVE_CACHE_DIR=$cache "$trove" --repo "$repo" snapshot "$tree" --workspace "$name" --no-default-excludes >/dev/null
    tar -cf - -C "$tree" . | zstd -3 -T0 -q -o "$work/$name.tar.zst"
    r=$(kib "$repo")
    m=$(kib "$repo/manifest.db")
    p=$(kib "$repo/packs")
    t=$(kib "$work/$name.tar.zst")
    c=$( [ -d "$cache" ] && kib "$cache" || echo 0 )
    files=$(find "$tree" -type f | wc -l)
    python3 - "$name" "$files" "$r" "$m" "$p" "$t" "$c" <<'EOF'
import sys
name, files, r, m, p, t, c = sys.argv[1], *map(int, sys.argv[2:])
print(f"{name} ({files} files): repository {r:,} KiB (manifest {m:,}, packs {p:,}) / .tar.zst {t:,} KiB = {r / t:.3f}"
      f" (packs alone {p / t:.3f}); node-local cache {c:,} KiB, not in the repository")
EOF
done
