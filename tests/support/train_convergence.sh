#!/usr/bin/env bash
# Convergence of a compressed hook against plain allreduce: `ddph train`
# with the same seed, steps and model (cosine-annealed, so both settle) must
# end with a whole-training-set loss no more than TOLERANCE (relative) above
# allreduce's, and must have sent at most 1/MIN_BYTES_FACTOR of allreduce's
# bytes (default 2: proof that compression ran on the training buckets
# rather than a fallback path; a family can demand its own ratio).
#   train_convergence.sh DDPH_BINARY SOURCE_DIR 'HOOK_YAML' TOLERANCE [STEPS]
#                        [MIN_BYTES_FACTOR] [TRAIN_FLAG ...]
# HOOK_YAML is a flow map for the `hook:` key, e.g.
#   '{family: quantization, name: per_channel, options: {protocol: reduce_scatter, bits: 8}}'
# TRAIN_FLAGs go to both runs, e.g. --hidden 256 --bucket-size 1024.KiB
# DDPH_CONVERGE_HOOK_FLAGS (environment) go to the hook's run only, e.g.
# "--dtype bf16" to compare a mixed-precision run with fp32 allreduce.
set -euo pipefail
ddph=$1 src=$2 hook=$3 tol=$4 steps=${5:-3000} factor=${6:-2}
shift $(( $# < 6 ? $# : 6 ))
flags=("$@")
read -r -a hook_flags <<< "${DDPH_CONVERGE_HOOK_FLAGS-}"
dir=$(mktemp -d /tmp/ddph-converge-XXXXXX)
trap 'rm -rf "$dir"' EXIT
printf 'comm: {backend: gloo, timeout: 60s}\nhook: %s\n' "$hook" > "$dir/hook.yaml"

run() {  # run CONFIG [EXTRA_FLAG ...]; prints "LOSS SENT_MIB"
  local out config=$1
  shift
  out=$("$ddph" train --config "$config" --steps "$steps" --log-every "$steps" ${flags[@]+"${flags[@]}"} "$@")
  echo "$out" | grep -q "bit-identical" || { echo "$out" >&2; echo "FAIL: ranks differ with $config" >&2; exit 1; }
  local loss sent
  loss=$(echo "$out" | sed -n 's/^train-set loss \([0-9.e+-]*\).*/\1/p')
  sent=$(echo "$out" | sed -n 's/.* \([0-9.]*\) MiB sent per rank.*/\1/p')
  echo "$loss $sent"
}
read -r base_loss base_mb < <(run "$src/configs/allreduce.yaml")
read -r loss mb < <(run "$dir/hook.yaml" ${hook_flags[@]+"${hook_flags[@]}"})
echo "allreduce: train-set loss $base_loss, $base_mb MiB sent per rank"
echo "$hook ${hook_flags[*]-}: train-set loss $loss, $mb MiB sent per rank (loss tolerance +$tol, bytes /$factor)"
awk -v a="$base_loss" -v b="$loss" -v t="$tol" -v ma="$base_mb" -v mb="$mb" -v f="$factor" 'BEGIN {
  if (!(a > 0 && b > 0)) { print "FAIL: no loss parsed"; exit 1 }
  if (!(ma > 0 && mb > 0)) { print "FAIL: no MiB sent per rank parsed"; exit 1 }
  d = (b - a) / a
  printf "relative loss difference %+.4f, bytes ratio %.4f (%.1fx fewer)\n", d, mb / ma, ma / mb
  if (d > t) { print "FAIL: loss above tolerance"; exit 1 }
  if (!(mb * f <= ma)) { print "FAIL: bytes not reduced " f "x (compression did not run, or too little)"; exit 1 }
  exit 0 }'
