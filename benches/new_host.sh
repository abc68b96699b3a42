#!/usr/bin/env bash
# A new host's first command against a repository in a bucket with a long log: from a copy of a
# replica, against replaying every segment. Two repositories in one bucket on moto's S3 server
# (the tests' own, under target/) get the same SEGMENTS writes (a session's `trove tool
# create_file` calls, one segment each), one with copies every COPY segments and one with none;
# then `trove snapshots` on a host with an empty cache directory is timed on each, alternating,
# ROUNDS times, and the median of the pair-by-pair ratios printed, with the copy's size.
#
# Usage: benches/new_host.sh [SEGMENTS] [COPY] [ROUNDS]   (needs: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
SEGMENTS=${1:-1000}
COPY=${2:-250}
ROUNDS=${3:-9}
TROVE=$PWD/target/release/trove
WORK=$(mktemp -d /tmp/newhost.XXXX)

. benches/moto.sh
start_moto "$WORK"
trap 'exec 3>&-; rm -rf "$WORK"' EXIT
export TROVE_PASSWORD=bench
curl -s -X PUT "$AWS_ENDPOINT_URL/newhost" > /dev/null

for kind in copies plain; do
  every=$COPY; [ "$kind" = plain ] && every=0
  export TROVE_LOG_COPY_EVERY=$every TROVE_CACHE_DIR=$WORK/writer-$kind TROVE_REPO=s3://newhost/$kind
  mkdir -p "$WORK/ws-$kind"
  "$TROVE" init > /dev/null
  sid=$("$TROVE" --json session create --dir "$WORK/ws-$kind" --workspace w --persistent --ttl 86400 \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  # The session's creation and the init are segments too.
  for i in $(seq 3 "$SEGMENTS"); do
    "$TROVE" tool create_file --session "$sid" "{\"path\": \"f$i.txt\", \"content\": \"version $i\"}" > /dev/null
  done
done
unset TROVE_LOG_COPY_EVERY TROVE_REPO
copy=$(curl -s "$AWS_ENDPOINT_URL/newhost?list-type=2&prefix=copies/replica/" | grep -o '<Size>[0-9]*' | tail -1)
echo "segments: $SEGMENTS, copies every $COPY; newest copy ${copy#<Size>} bytes"

seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
ratios=()
for i in $(seq 1 "$ROUNDS"); do
  rm -rf "$WORK/new-copies" "$WORK/new-plain"
  if [ $((i % 2)) -eq 1 ]; then
    c=$(TROVE_CACHE_DIR=$WORK/new-copies seconds "$TROVE" --repo s3://newhost/copies snapshots)
    p=$(TROVE_CACHE_DIR=$WORK/new-plain seconds "$TROVE" --repo s3://newhost/plain snapshots)
  else
    p=$(TROVE_CACHE_DIR=$WORK/new-plain seconds "$TROVE" --repo s3://newhost/plain snapshots)
    c=$(TROVE_CACHE_DIR=$WORK/new-copies seconds "$TROVE" --repo s3://newhost/copies snapshots)
  fi
  echo "round $i: from a copy $c s, the whole log $p s"
  ratios+=("$(echo "scale=4; $c / $p" | bc)")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio copy/whole log: " a[int((NR+1)/2)] " (" a[1] "-" a[NR] ")"}'
