# Runs on the lent GPU machine from the repository root, after
# `tar -xJf build-dev/pack.tar.xz -C build-dev` (pack.sh makes it), with OUT
# set to a folder for the results: makes the build's absolute
# paths (/work/main/build) resolve, finds NCCL, cuBLAS and cuSOLVER, then
# runs what $1 names: tests (the ctest -L gpu list), bench, overlap or auto.
set -u
ROOT=$PWD
if [ "$ROOT" != /work/main ]; then mkdir -p /work; ln -sfn "$ROOT" /work/main; fi
ln -sfn build-dev/pack build
libdirs=$(find /usr /opt \( -name 'libnccl.so.2' -o -name 'libcublas.so.13' -o -name 'libcusolver.so.12' -o -name 'libcublasLt.so.13' -o -name 'libcusparse.so.12' -o -name 'libnvJitLink.so.13' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=$ROOT/build-dev/pack/sys:${libdirs}${LD_LIBRARY_PATH:-}
export OPENBLAS_NUM_THREADS=1
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
ldd build/bin/ddph_test_comm_nccl build/lib/ddphooks/*.so | grep -i "not found"
case "$1" in
tests)
  PYTHONUNBUFFERED=1 python3 build-dev/pack/run_tests.py build-dev/pack/gpu_tests.json "$OUT"
  build/bin/ddph_bench_gpu_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 | tee "$OUT/bench_gpu_kernels.txt"
  ;;
bench)
  bash build-dev/pack/hook_bench.sh 2>&1 | tee "$OUT/bench_hooks.txt"
  ;;
overlap)
  bash build-dev/pack/overlap_bench.sh 2>&1 | tee "$OUT/bench_overlap.txt"
  ;;
auto)
  bash build-dev/pack/auto_bench.sh 2>&1 | tee "$OUT/bench_auto.txt"
  ;;
esac
