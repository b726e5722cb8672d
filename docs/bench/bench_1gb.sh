#!/usr/bin/env bash
# The 1 GiB bucket benchmark of docs/benchmarks.md: `ddph bench --bucket-size
# 1024MiB` at world 2 for allreduce, fp16_compress, quantization rs8 and
# powersgd (rank 2, compressing from step 2, 4096 x 4096 matrices), each
# config RUNS times in its own process under /usr/bin/time -v. Prints one
# markdown row per config: median over runs of the per-run median time per
# bucket, of Gloo's raw allreduce of the same buffer, and the largest peak
# RSS of one rank (time -v reports the largest process of the tree; every
# rank is a forked process of its own).
#   docs/bench/bench_1gb.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${2:-3}
out=$(mktemp -d /tmp/ddph-bench-1gb-XXXXXX)
export OPENBLAS_NUM_THREADS=1  # 2 ranks share this machine's 2 cores
printf 'comm: {backend: gloo, timeout: 300s}\nhook: {family: powersgd, name: powersgd, options: {rank: 2, start_iter: 2}}\n' \
  > "$out/powersgd.yaml"
declare -A extra=([powersgd]="--matrix 4096x4096")
declare -A config=([allreduce]=configs/allreduce.yaml [fp16_compress]=configs/fp16.yaml
                   [quantization_rs8]=configs/quantization_rs8.yaml [powersgd]="$out/powersgd.yaml")
echo "| config | runs | time per bucket | Gloo allreduce | ratio | wire/rank | peak RSS per rank |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for name in allreduce fp16_compress quantization_rs8 powersgd; do
  for run in $(seq "$runs"); do
    # shellcheck disable=SC2086
    /usr/bin/time -v -o "$out/$name.$run.time" "$build/bin/ddph" bench --config "${config[$name]}" \
      --world 2 --bucket-size 1024MiB --iters 3 --warmup 2 ${extra[$name]:-} --json >> "$out/$name.jsonl"
  done
  /usr/bin/python3 - "$out" "$name" "$runs" <<'PY'
import json, re, statistics, sys
out, name, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
rss = [int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/{name}.{r}.time").read()).group(1))
       for r in range(1, runs + 1)]
t = statistics.median(r["median_s"] for r in rows)
b = statistics.median(r["baseline_allreduce_median_s"] for r in rows)
ratios = " ".join(f"{r['median_s'] / r['baseline_allreduce_median_s']:.2f}" for r in rows)
print(f"| `{name}` | {runs} | {t * 1e3:.0f} ms | {b * 1e3:.0f} ms | **{t / b:.2f}** ({ratios}) "
      f"| {rows[0]['wire_bytes_per_rank'] / 2**20:.0f} MB | {max(rss) / 2**20:.2f} GiB |")
PY
done
rm -rf "$out"
