#!/usr/bin/env bash
# A review host opening a fleet: NODES nodes of one bucket of a log per node (moto's S3 server,
# the tests' own under target/), each with SESSIONS sessions of SNAPSHOTS snapshots (filled by
# `cargo bench --bench fleet`); then `trove session list --all` on a review host, ROUNDS times
# with an empty cache directory (a new review host: every node's replica from its newest copy
# and the log after it) and ROUNDS times with the cache it left (a warm one), each time as its
# own process; then a review server (`trove serve`, empty cache) asked `GET /v1/sessions` first
# (opening the fleet) and ROUNDS times after (warm). Prints the medians and ranges. A command's
# process unwraps the key file (Argon2id) at every open; a server does once.
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
echo "new review host, a command: $(median "${cold[@]}")"
echo "warm review host, a command: $(median "${warm[@]}")"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/served"
TROVE_API_TOKEN=fleet-bench-token TROVE_CACHE_DIR=$WORK/review-server "$TROVE" --node review serve \
  --listen "127.0.0.1:$port" --workspaces "$WORK/served" > "$WORK/serve.log" 2>&1 &
server=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/healthz" > /dev/null && break; sleep 0.05; done
get() { curl -sf -o "$WORK/sessions.json" -w '%{time_total}' -H "Authorization: Bearer fleet-bench-token" "http://127.0.0.1:$port/v1/sessions?include_ended=true"; }
first=$(get)
echo "review server, first GET /v1/sessions (opening the fleet): $first s, $(python3 -c "import json; print(len(json.load(open('$WORK/sessions.json'))))") sessions"
due=() fresh=()
for i in $(seq 1 "$ROUNDS"); do sleep 1.1; due+=("$(get)"); fresh+=("$(get)"); done
echo "review server, warm GET /v1/sessions, every node's catch-up due (one GET each): $(median "${due[@]}")"
echo "review server, warm GET /v1/sessions, within a second of the last: $(median "${fresh[@]}")"
kill "$server"
