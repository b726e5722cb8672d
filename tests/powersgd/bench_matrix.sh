#!/usr/bin/env bash
# `ddph bench --matrix`: the bucket tiled with matrices is what powersgd
# compresses. With --matrix 256x256 a 2 MiB bucket (8 matrices) must put
# under a tenth of the baseline's bytes on the wire; without it the bucket
# is one flat gradient, which PowerSGD never compresses (all of it is sent).
# A malformed --matrix is a usage error (exit 2).
#   bench_matrix.sh DDPH_BINARY SOURCE_DIR
set -euo pipefail
ddph=$1 src=$2
bench() {
  "$ddph" bench --config "$src/configs/powersgd.yaml" --world 2 --bucket-size 2MiB --iters 3 \
    --warmup 10 --json "$@" | sed -n 's/.*"bucket_bytes":\([0-9]*\).*"wire_bytes_per_rank":\([0-9]*\).*/\1 \2/p'
}
read -r bytes tiled < <(bench --matrix 256x256)
read -r _ flat < <(bench)
echo "bucket $bytes bytes; wire per rank: tiled $tiled, flat $flat"
[ "$tiled" -gt 0 ] && [ $((tiled * 10)) -lt "$bytes" ] || { echo "FAIL: tiled bucket not compressed"; exit 1; }
[ "$flat" -ge "$bytes" ] || { echo "FAIL: a flat bucket was compressed"; exit 1; }
set +e
"$ddph" bench --config "$src/configs/powersgd.yaml" --matrix 256by256 >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --matrix 256by256 accepted"; exit 1; }
echo ok
