#!/usr/bin/env bash
# Runs WORLD processes of the plain-C example host over real Gloo and checks
# that each rank holds the mean.
#   c_host_test.sh HOST_BINARY LIB_DIR CONFIG WORLD
set -euo pipefail
host=$1 libdir=$2 config=$3 world=$4
dir=$(mktemp -d /tmp/ddph-chost-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export DDPH_LIBRARY=$libdir/libddph.so.1
pids=()
for ((r = 0; r < world; r++)); do
  timeout 60 "$host" "$config" "$r" "$world" "file://$dir" 4099 > "$dir/out.$r" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat "$dir"/out.*
[ $status -eq 0 ] && [ "$(grep -c ': ok' "$dir"/out.* | awk -F: '{s+=$2} END {print s}')" -eq "$world" ]
