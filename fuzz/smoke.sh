#!/usr/bin/env bash
# Runs every fuzz target for a few seconds (default 5) on the stable toolchain, installing
# cargo-fuzz if it is missing; exits non-zero if a target crashes. CI calls it.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-5}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
for target in $(cargo fuzz list); do
  mkdir -p "corpus/$target"
  # A copy of the committed seeds: what the run adds stays out of the repository.
  work=$(mktemp -d)
  cp -r "corpus/$target/." "$work/"
  echo "fuzz smoke: $target (${seconds}s)"
  cargo fuzz run -s none "$target" "$work" -- -max_total_time="$seconds" -rss_limit_mb=2048
  rm -rf "$work"
done
