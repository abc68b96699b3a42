#!/usr/bin/env bash
# trove and restic against one S3 server (moto's, from the virtualenv the tests install under
# target/), alternating: a cold snapshot of DIR into a fresh prefix, then a full restore of it
# with no local cache, ROUNDS times each; prints one line per run and the medians of the
# pair-by-pair ratios (trove / restic).
#
# Usage: benches/s3_vs_restic.sh DIR [ROUNDS]
# Needs: restic (Debian's), a release build (cargo build --release), target/moto-5.2.5 (made by
# `cargo test --test s3`).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$(cd "${1:?usage: s3_vs_restic.sh DIR [ROUNDS]}" && pwd)
ROUNDS=${2:-5}
TROVE=$PWD/target/release/trove
WORK=$(mktemp -d /tmp/s3bench.XXXX)

. benches/moto.sh
start_moto "$WORK"
trap 'exec 3>&-' EXIT
export TROVE_PASSWORD=bench RESTIC_PASSWORD=bench
curl -s -X PUT "$AWS_ENDPOINT_URL/bench" > /dev/null

seconds() { # the wall time of a command, in seconds
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

ratios_snap=() ratios_restore=()
for i in $(seq 1 "$ROUNDS"); do
  tcache=$WORK/trove-cache-$i
  TROVE_CACHE_DIR=$tcache "$TROVE" --repo "s3://bench/trove-$i" init > /dev/null
  restic -r "s3:$AWS_ENDPOINT_URL/bench/restic-$i" init > /dev/null 2>&1
  # The tree read once before the pair, so neither pays for a cold page cache.
  tar cf - "$DIR" 2> /dev/null | cat > /dev/null
  # Alternate which goes first, so neither always meets the warmer server.
  if [ $((i % 2)) -eq 1 ]; then
    t=$(TROVE_CACHE_DIR=$tcache seconds "$TROVE" --repo "s3://bench/trove-$i" snapshot "$DIR" --workspace w)
    r=$(seconds restic -r "s3:$AWS_ENDPOINT_URL/bench/restic-$i" --no-cache backup "$DIR")
  else
    r=$(seconds restic -r "s3:$AWS_ENDPOINT_URL/bench/restic-$i" --no-cache backup "$DIR")
    t=$(TROVE_CACHE_DIR=$tcache seconds "$TROVE" --repo "s3://bench/trove-$i" snapshot "$DIR" --workspace w)
  fi
  ratios_snap+=("$(echo "scale=4; $t / $r" | bc)")
  echo "round $i: cold snapshot trove $t s, restic $r s"
  # Restores from the bucket alone: trove on a host with no cache, restic with --no-cache.
  if [ $((i % 2)) -eq 1 ]; then
    t=$(TROVE_CACHE_DIR=$WORK/fresh-$i seconds "$TROVE" --repo "s3://bench/trove-$i" restore latest --to "$WORK/tr-$i")
    r=$(seconds restic -r "s3:$AWS_ENDPOINT_URL/bench/restic-$i" --no-cache restore latest --target "$WORK/rr-$i")
  else
    r=$(seconds restic -r "s3:$AWS_ENDPOINT_URL/bench/restic-$i" --no-cache restore latest --target "$WORK/rr-$i")
    t=$(TROVE_CACHE_DIR=$WORK/fresh-$i seconds "$TROVE" --repo "s3://bench/trove-$i" restore latest --to "$WORK/tr-$i")
  fi
  ratios_restore+=("$(echo "scale=4; $t / $r" | bc)")
  echo "round $i: full restore trove $t s, restic $r s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "median ratio trove/restic: cold snapshot $(median "${ratios_snap[@]}"), full restore $(median "${ratios_restore[@]}")"
echo "(work left in $WORK)"
