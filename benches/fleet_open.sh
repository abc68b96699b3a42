#!/usr/bin/env bash
# A review host opening a fleet: NODES nodes of one bucket of a log per node (moto's S3 server,
# the tests' own under target/), each with SESSIONS sessions of SNAPSHOTS snapshots (filled by
# `cargo bench --bench fleet`); then `trove session list --all` on a review host, ROUNDS times
# with an empty cache directory (a new review host: every node's replica from its newest copy
# and the log after it) and ROUNDS times with the cache it left (a warm one), each time as its
# own process. Prints the medians and ranges.
#
# Usage: benches/fleet_open.sh [NODES] [SESSIONS] [SNAPSHOTS] [ROUNDS]   (needs: cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
export NODES=${1:-10} SESSIONS=${2:-100} SNAPSHOTS=${3:-10}
ROUNDS=${4:-5}
TROVE=$PWD/target/release/trove
WORK=$(mktemp -d /tmp/fleetopen.XXXX)

. benches/moto.sh
start_moto "$WORK"
trap 'exec 3>&-; rm -rf "$WORK"' EXIT
export TROVE_PASSWORD=bench TROVE_REPO=s3://fleet/repo FLEET_CACHES=$WORK/caches
curl -s -X PUT "$AWS_ENDPOINT_URL/fleet" > /dev/null
TROVE_CACHE_DIR=$WORK/caches/node-0 "$TROVE" --node node-0 init --layout nodes > /dev/null
cargo bench --quiet --bench fleet

seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" > "$WORK/out.json"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
listed=$(TROVE_CACHE_DIR=$WORK/review "$TROVE" --json --node review session list --all \
  | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
echo "sessions listed: $listed"
cold=() warm=()
for i in $(seq 1 "$ROUNDS"); do
  rm -rf "$WORK/review"
  cold+=("$(TROVE_CACHE_DIR=$WORK/review seconds "$TROVE" --json --node review session list --all)")
  warm+=("$(TROVE_CACHE_DIR=$WORK/review seconds "$TROVE" --json --node review session list --all)")
  echo "round $i: new review host ${cold[-1]} s, warm ${warm[-1]} s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] " s (" a[1] "-" a[NR] ")"}'; }
echo "new review host: $(median "${cold[@]}")"
echo "warm review host: $(median "${warm[@]}")"
