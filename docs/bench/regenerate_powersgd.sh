#!/usr/bin/env bash
# Regenerates the PowerSGD section of docs/benchmarks.md: `ddph bench` at
# world 2 on one 100 MiB bucket of 25 gradient matrices of 1024 x 1024
# (26.2M parameters, --matrix), RUNS times (medians are reported), each
# config in its own run beside Gloo's raw fp32 allreduce of the same buffer;
# the hooks' DEBUG log splits each step into compressing and collectives.
# PyTorch 1.13's own hooks are timed on the same model by powersgd_torch.py.
#   docs/bench/regenerate_powersgd.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${2:-5}
out=docs/bench/powersgd_results
rm -rf "$out" && mkdir -p "$out"
# One thread per rank: 2 ranks share this machine's 2 cores.
export OPENBLAS_NUM_THREADS=1 DDPH_LOG_LEVEL=debug
write() {  # name options
  printf 'comm: {backend: gloo, timeout: 120s}\nhook: {family: powersgd, name: powersgd, options: {%s}}\n' \
    "$2" > "$out/$1.yaml"
}
write powersgd_rank1 "rank: 1, start_iter: 2"
write powersgd_rank4 "rank: 4, start_iter: 2"
write powersgd_rank1_no_ef "rank: 1, start_iter: 2, error_feedback: false"
write powersgd_rank4_no_ef "rank: 4, start_iter: 2, error_feedback: false"
cp configs/allreduce.yaml "$out/allreduce.yaml"
for run in $(seq "$runs"); do
  for c in allreduce powersgd_rank1 powersgd_rank4 powersgd_rank1_no_ef powersgd_rank4_no_ef; do
    "$build/bin/ddph" bench --config "$out/$c.yaml" --world 2 --bucket-size 100MiB --matrix 1024x1024 \
      --iters 5 --warmup 3 --json >> "$out/bench.jsonl" 2> "$out/$c.$run.log"
  done
  /usr/bin/python3 docs/bench/powersgd_torch.py --world 2 --matrices 25 --rows 1024 --cols 1024 \
    --iters 5 --warmup 3 >> "$out/torch.jsonl" || echo '{"torch_failed": true}' >> "$out/torch.jsonl"
done
/usr/bin/python3 docs/bench/powersgd_report.py "$out" docs/benchmarks.md \
  "docs/bench/regenerate_powersgd.sh $build $runs"
