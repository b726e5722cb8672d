#!/usr/bin/env bash
# Convergence of a compressed hook against plain allreduce: `ddph train`
# with the same seed and steps (cosine-annealed, so both settle) must end
# with a whole-training-set loss no more than TOLERANCE (relative) above
# allreduce's, and must have sent under half of allreduce's bytes (proof that
# compression ran on the training buckets rather than a fallback path).
#   train_convergence.sh DDPH_BINARY SOURCE_DIR 'HOOK_YAML' TOLERANCE [STEPS]
# HOOK_YAML is a flow map for the `hook:` key, e.g.
#   '{family: quantization, name: per_channel, options: {protocol: reduce_scatter, bits: 8}}'
set -euo pipefail
ddph=$1 src=$2 hook=$3 tol=$4 steps=${5:-3000}
dir=$(mktemp -d /tmp/ddph-converge-XXXXXX)
trap 'rm -rf "$dir"' EXIT
printf 'comm: {backend: gloo, timeout: 60s}\nhook: %s\n' "$hook" > "$dir/hook.yaml"

run() {  # prints "LOSS BYTES_MB"
  local out
  out=$("$ddph" train --config "$1" --steps "$steps" --log-every "$steps")
  echo "$out" | grep -q "bit-identical" || { echo "$out" >&2; echo "FAIL: ranks differ with $1" >&2; exit 1; }
  local loss sent
  loss=$(echo "$out" | sed -n 's/^train-set loss \([0-9.e+-]*\).*/\1/p')
  sent=$(echo "$out" | sed -n 's/.* \([0-9.]*\) MB sent per rank.*/\1/p')
  echo "$loss $sent"
}
read -r base_loss base_mb < <(run "$src/configs/allreduce.yaml")
read -r loss mb < <(run "$dir/hook.yaml")
echo "allreduce: train-set loss $base_loss, $base_mb MB sent per rank"
echo "$hook: train-set loss $loss, $mb MB sent per rank (loss tolerance +$tol)"
awk -v a="$base_loss" -v b="$loss" -v t="$tol" -v ma="$base_mb" -v mb="$mb" 'BEGIN {
  d = (b - a) / a
  printf "relative loss difference %+.4f, bytes ratio %.3f\n", d, mb / ma
  if (!(a > 0 && b > 0)) { print "FAIL: no loss parsed"; exit 1 }
  if (d > t) { print "FAIL: loss above tolerance"; exit 1 }
  if (!(mb < 0.5 * ma)) { print "FAIL: compression did not run (bytes not reduced)"; exit 1 }
  exit 0 }'
