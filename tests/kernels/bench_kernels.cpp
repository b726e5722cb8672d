// Google Benchmark timings of the casts and reductions on 25 MB buffers (a
// typical DDP bucket) at every instruction-set level this CPU has. Not a
// test; run build/bin/ddph_bench_kernels.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "core/kernels/cast.h"
#include "core/kernels/divide.h"
#include "core/kernels/isa.h"
#include "core/kernels/reduce.h"
#include "tests/support/bench_isa_level.h"

namespace {

using ddph::DType;
using ddph::Isa;

constexpr size_t kBytes = 25u << 20;
constexpr size_t kFloats = kBytes / 4;

std::vector<float> make_floats() {
  std::vector<float> v(kFloats);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i)) * 1e-2f;
  return v;
}

using Level = ddph_test::BenchIsaLevel;

void BM_CastDown(benchmark::State& st, DType low) {
  Level level(st);
  std::vector<float> src = make_floats();
  std::vector<uint16_t> dst(kFloats);
  for (auto _ : st) {
    ddph::cast_into(DType::F32, src.data(), low, dst.data(), kFloats);
    benchmark::DoNotOptimize(dst.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

void BM_CastDownDiv(benchmark::State& st, DType low) {
  Level level(st);
  std::vector<float> src = make_floats();
  std::vector<uint16_t> dst(kFloats);
  for (auto _ : st) {
    ddph::cast_div_into(DType::F32, src.data(), low, dst.data(), kFloats, 3);
    benchmark::DoNotOptimize(dst.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

void BM_CastUp(benchmark::State& st, DType low) {
  Level level(st);
  std::vector<float> src = make_floats(), dst(kFloats);
  std::vector<uint16_t> mid(kFloats);
  ddph::cast_into(DType::F32, src.data(), low, mid.data(), kFloats);
  for (auto _ : st) {
    ddph::cast_into(low, mid.data(), DType::F32, dst.data(), kFloats);
    benchmark::DoNotOptimize(dst.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

// Sums buffers of 25 MB of fp32 data: 25 MB for F32, 12.5 MB for 16-bit.
// The allreduce hook's divide-by-world pass, in place. Dividing by 1 keeps
// the values stable across iterations (and costs the same as any divisor).
void BM_DivideInplace(benchmark::State& st) {
  Level level(st);
  std::vector<float> v = make_floats();
  for (auto _ : st) {
    ddph::divide_inplace(DType::F32, v.data(), kFloats, 1);
    benchmark::DoNotOptimize(v.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

void BM_Sum(benchmark::State& st, DType t) {
  Level level(st);
  const size_t n = kFloats;
  const size_t bytes = n * ddph::dtype_size(t);
  std::vector<uint8_t> a(bytes, 0x3c), b(bytes, 0x3a);
  for (auto _ : st) {
    ddph::reduce_into(DDPH_SUM, t, a.data(), a.data(), b.data(), n);
    benchmark::DoNotOptimize(a.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(bytes));
}

void levels(benchmark::internal::Benchmark* b) {
  for (int i = 0; i <= int(Isa::kAvx512Bf16); ++i) b->Arg(i);
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_CastDown, f16, DType::F16)->Apply(levels);
BENCHMARK_CAPTURE(BM_CastDown, bf16, DType::BF16)->Apply(levels);
BENCHMARK_CAPTURE(BM_CastDownDiv, f16, DType::F16)->Apply(levels);
BENCHMARK_CAPTURE(BM_CastDownDiv, bf16, DType::BF16)->Apply(levels);
BENCHMARK_CAPTURE(BM_CastUp, f16, DType::F16)->Apply(levels);
BENCHMARK_CAPTURE(BM_CastUp, bf16, DType::BF16)->Apply(levels);
BENCHMARK(BM_DivideInplace)->Apply(levels);
BENCHMARK_CAPTURE(BM_Sum, f32, DType::F32)->Apply(levels);
BENCHMARK_CAPTURE(BM_Sum, f16, DType::F16)->Apply(levels);
BENCHMARK_CAPTURE(BM_Sum, bf16, DType::BF16)->Apply(levels);

}  // namespace

BENCHMARK_MAIN();
