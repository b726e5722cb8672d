// Google Benchmark helper: the yardstick the kernel benchmarks stand beside,
// a memcpy of the same bytes in the same binary and run, so a kernel's speed
// reads as a fraction of this machine's copy bandwidth.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace ddph_test {

// Copies src into a buffer of its size once per iteration; bytes/s counts
// src's bytes once.
inline void bench_memcpy(benchmark::State& st, const std::vector<float>& src) {
  std::vector<float> dst(src.size(), 1.0f);
  const size_t bytes = src.size() * sizeof(float);
  for (auto _ : st) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(bytes));
}

}  // namespace ddph_test
