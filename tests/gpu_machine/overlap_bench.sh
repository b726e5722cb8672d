#!/usr/bin/env bash
# ddph bench --overlap for hook_then_optimizer on host buckets, run on the
# lent GPU machine for its CPUs: 16 cores give each rank a core for the
# step thread beside the one moving the next bucket, which the project's
# 2-core VM cannot (docs/benchmarks.md, "hook_then_optimizer pipelined").
# Five rounds of each row; read the medians. Run by device.sh overlap.
set -u
cfg=configs/hook_then_optimizer_adam.yaml
for round in 1 2 3 4 5; do
  for row in "8 5 32MiB 2" "8 20 64MiB 2" "16 5 64MiB 2" "8 5 32MiB 4"; do
    set -- $row
    echo "== round $round: --overlap $1 --backward-ms $2 --bucket-size $3 --world $4"
    build/bin/ddph bench --config "$cfg" --overlap "$1" --backward-ms "$2" --bucket-size "$3" \
      --world "$4" --iters 30 --warmup 3
  done
done
for round in 1 2 3; do
  echo "== round $round: --overlap 8 --backward-ms 5 --bucket-size 32MiB --world 2 --link 1gbit"
  build/bin/ddph bench --config "$cfg" --overlap 8 --backward-ms 5 --bucket-size 32MiB \
    --world 2 --iters 30 --warmup 3 --link 1gbit
done
