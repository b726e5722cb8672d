#!/usr/bin/env bash
# Regenerates the quantization section of docs/benchmarks.md and
# docs/bench/quantization.png: `ddph bench` on 25 MB buckets at world 2, 3
# and 4, RUNS times each (medians are reported), every config side by side
# with Gloo's raw fp32 allreduce timed in the same run.
#   docs/bench/regenerate_quantization.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${2:-5}
configs=(configs/allreduce.yaml configs/fp16.yaml
         configs/quantization_per_tensor.yaml configs/quantization_per_channel.yaml
         configs/quantization_rs8.yaml configs/quantization_rs4_ef.yaml)
# The raw lines stay beside the report, so it can be re-rendered or checked.
results=docs/bench/quantization_results.jsonl
: > "$results"
for world in 2 3 4; do
  for run in $(seq "$runs"); do
    args=()
    for c in "${configs[@]}"; do args+=(--config "$c"); done
    "$build/bin/ddph" bench "${args[@]}" --world "$world" --bucket-size 25MiB --iters 10 --json >> "$results"
  done
done
/usr/bin/python3 docs/bench/quantization_report.py "$results" docs/benchmarks.md \
  docs/bench/quantization.png "docs/bench/regenerate_quantization.sh $build $runs"
