#!/usr/bin/env bash
# Builds the libFuzzer tree (clang-14, ASan + UBSan everywhere) and runs each
# fuzzer on its committed seed corpus for SECONDS (default 60). Any crash,
# leak, sanitizer report or per-input hang (> 10 s) fails. Prints what each
# fuzzer tried, for docs/reliability.md.
#   tests/fuzz/run_fuzzers.sh [SECONDS] [BUILD_DIR]
# Longer runs: tests/fuzz/run_fuzzers.sh 3600. DDPH_FUZZ_SEED (default 1)
# makes CI's short runs repeatable; set another seed to explore elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
build=${2:-build-fuzz}
# log_phase NAME SECONDS: for build.sh's table of phases (DDPH_PHASE_LOG).
log_phase() { [ -z "${DDPH_PHASE_LOG:-}" ] || printf '%s\t%s\n' "$1" "$2" >>"$DDPH_PHASE_LOG"; }
t0=$(date +%s)
cmake -S . -B "$build" -G Ninja -DDDPH_FUZZ=ON -DDDPH_WITH_CUDA=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target ddph_fuzzers
t1=$(date +%s)
log_phase "fuzzers: build (clang, ASan+UBSan)" $((t1 - t0))
status=0
for f in config state bucket; do
  work=$(mktemp -d /tmp/ddph-fuzz-corpus-XXXXXX)
  log=$(mktemp /tmp/ddph-fuzz-log-XXXXXX)
  echo "== ddph_fuzz_$f: ${seconds} s"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "$build/bin/ddph_fuzz_$f" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -print_final_stats=1 -seed="${DDPH_FUZZ_SEED:-1}" -artifact_prefix="$log-" "$work" "tests/fuzz/corpus/$f" >"$log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::new_units_added|^stat::peak_rss_mb" "$log" |
      sed "s/^/  /"
  else
    tail -60 "$log"
    echo "FAIL: ddph_fuzz_$f found a problem (full log: $log; the input: $log-crash-*)"
    status=1
  fi
  rm -rf "$work"
done
log_phase "fuzzers: run (3 x ${seconds} s)" $(($(date +%s) - t1))
exit $status
