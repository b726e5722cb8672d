#!/usr/bin/env bash
# The hooks on emulated links (docs/lab.md, "Hooks on a link"): every hook
# at 1 and 10 Gbit/s, world 2 and 4, on a 25 MiB bucket (1024 x 1024
# matrices for PowerSGD), and the same runs without a link (plain
# loopback: the hook's time when the wire costs nothing), one JSON line per
# hook and setting on stdout. docs/bench/link_table.py turns it into tables.
#   docs/bench/link_bench.sh [BUILD_DIR] > results.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
ddph=${1:-build}/bin/ddph
psgd=docs/bench/lab_results
for link in 1gbit 10gbit none; do
  flag=(--link $link)
  [ $link = none ] && flag=()
  for world in 2 4; do
    "$ddph" bench "${flag[@]}" --world $world --bucket-size 25MiB --iters 7 --warmup 2 --json \
      --config configs/allreduce.yaml --config configs/fp16.yaml --config configs/bf16.yaml \
      --config configs/quantization_rs8.yaml --config configs/quantization_rs4_ef.yaml
    "$ddph" bench "${flag[@]}" --world $world --bucket-size 25MiB --matrix 1024x1024 --iters 7 \
      --warmup 3 --json --config configs/allreduce.yaml --config $psgd/psgd1.yaml \
      --config $psgd/psgd4.yaml
  done
done
