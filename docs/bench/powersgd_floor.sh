#!/usr/bin/env bash
# How far below the raw allreduce a PowerSGD step can go on this machine:
# two copies of BM_StepPasses (a step's three host passes over the 100 MiB
# benchmark bucket, with no collective or orthogonalization between them)
# run at once, as the two ranks of a world-2 step do, and Gloo's raw fp32
# allreduce of the same bucket at world 2 runs right after, ROUNDS times.
# Prints a markdown table: medians over rounds, and each pass-time's ratio
# to the allreduce of its own round.
#   docs/bench/powersgd_floor.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
passes() {  # output file
  "$build/bin/ddph_bench_powersgd" --benchmark_filter=StepPasses --benchmark_min_time=2 \
    --benchmark_format=json > "$1" 2> /dev/null
}
for round in $(seq "$rounds"); do
  passes "$tmp/a.$round.json" &
  passes "$tmp/b.$round.json"
  wait
  "$build/bin/ddph" bench --config configs/allreduce.yaml --world 2 --bucket-size 100MiB \
    --matrix 1024x1024 --iters 5 --warmup 3 --json > "$tmp/allreduce.$round.json" 2> /dev/null
done
/usr/bin/python3 - "$tmp" "$rounds" "$build" << 'EOF'
import json, statistics, sys
tmp, rounds, build = sys.argv[1], int(sys.argv[2]), sys.argv[3]
times, ratios, base = {}, {}, []
for k in range(1, rounds + 1):
    b = json.loads(open(f"{tmp}/allreduce.{k}.json").readline())["baseline_allreduce_median_s"] * 1e3
    base.append(b)
    for copy in "ab":
        for row in json.load(open(f"{tmp}/{copy}.{k}.json"))["benchmarks"]:
            name = row["name"].split("/")
            key = (name[1], name[2])
            times.setdefault(key, []).append(row["real_time"])
            ratios.setdefault(key, []).append(row["real_time"] / b)
print(f"`docs/bench/powersgd_floor.sh {build} {rounds}`: raw fp32 allreduce of the bucket at world 2, "
      f"median {statistics.median(base):.1f} ms ({min(base):.1f}-{max(base):.1f}); 0.3x of it is "
      f"{0.3 * statistics.median(base):.1f} ms.\n")
print("| step passes, both ranks at once | median ms (range) | ratio to the allreduce of the same round, median (range) |")
print("| --- | --- | --- |")
for key in sorted(times, key=lambda k: (k[1], k[0])):
    t, r = times[key], ratios[key]
    ef = "error feedback (deferred)" if key[1] == "ef:2" else "no error feedback"
    print(f"| {key[0].replace(':', ' = ')}, {ef} | {statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f}) "
          f"| **{statistics.median(r):.2f}** ({min(r):.2f}-{max(r):.2f}) |")
EOF
