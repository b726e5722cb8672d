// Google Benchmark timings of PowerSGD's three host passes over issue 4's
// benchmark bucket (25 matrices of 1024 x 1024 fp32, 100 MiB), beside a
// memcpy of the same bytes in the same binary. Not a test; run
// build/bin/ddph_bench_powersgd. range(0) is the rank r; range(1) the error
// feedback (see Ranks). Bytes/s counts the bucket's bytes once per pass.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "plugins/powersgd/lowrank.h"
#include "tests/support/bench_memcpy.h"

namespace {

namespace ps = ddph::powersgd;

constexpr int kMatrices = 25;
constexpr int kRows = 1024;
constexpr int kCols = 1024;
constexpr size_t kPer = size_t(kRows) * kCols;
constexpr size_t kFloats = kPer * kMatrices;
constexpr int64_t kBytes = int64_t(kFloats * sizeof(float));

std::vector<float> make_floats(float phase) {
  std::vector<float> v(kFloats);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i) + phase) * 1e-2f;
  return v;
}

struct Factors {
  std::vector<float> p, q;
  explicit Factors(int r)
      : p(size_t(kRows) * r * kMatrices, 0.5f), q(size_t(kCols) * r * kMatrices, 0.25f) {}
};

void BM_Memcpy(benchmark::State& st) {
  ddph_test::bench_memcpy(st, make_floats(0));
}

void BM_MultiplyMQ(benchmark::State& st) {
  const int r = int(st.range(0));
  const std::vector<float> data = make_floats(0);
  std::vector<float> err = make_floats(1);
  Factors f(r), last(r);
  for (auto _ : st) {
    for (int k = 0; k < kMatrices; ++k) {
      ps::Pending pending;
      if (st.range(1) == 2)
        pending = ps::Pending{last.p.data() + size_t(k) * kRows * r,
                              last.q.data() + size_t(k) * kCols * r};
      ps::multiply_mq(data.data() + k * kPer, st.range(1) ? err.data() + k * kPer : nullptr, kRows,
                      kCols, f.q.data() + size_t(k) * kCols * r, r,
                      f.p.data() + size_t(k) * kRows * r, pending);
    }
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

void BM_MultiplyMTP(benchmark::State& st) {
  const int r = int(st.range(0));
  const std::vector<float> m = make_floats(0);
  Factors f(r);
  for (auto _ : st) {
    for (int k = 0; k < kMatrices; ++k)
      ps::multiply_mtp(m.data() + k * kPer, kRows, kCols, f.p.data() + size_t(k) * kRows * r, r,
                       f.q.data() + size_t(k) * kCols * r);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

void BM_Reconstruct(benchmark::State& st) {
  const int r = int(st.range(0));
  std::vector<float> out = make_floats(0);
  std::vector<float> before = make_floats(1);
  Factors f(r);
  for (auto _ : st) {
    for (int k = 0; k < kMatrices; ++k)
      ps::reconstruct(f.p.data() + size_t(k) * kRows * r, f.q.data() + size_t(k) * kCols * r, kRows,
                      kCols, r, out.data() + k * kPer,
                      st.range(1) ? before.data() + k * kPer : nullptr);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

// A step's three passes back to back, as the layer-wise hook runs them on
// the host, without the collectives and orthogonalizations between them:
// the time a step cannot go below on this machine. ef 0: M is the data; ef
// 2: deferred error feedback (the hook's default). The factors read are
// fixed and the ones written are scratch, so the values stay finite.
void BM_StepPasses(benchmark::State& st) {
  const int r = int(st.range(0));
  const bool ef = st.range(1) != 0;
  std::vector<float> data = make_floats(0);
  std::vector<float> err = make_floats(1);
  const Factors fixed(r);
  Factors written(r);
  const auto p_at = [r](int k) { return size_t(k) * kRows * r; };
  const auto q_at = [r](int k) { return size_t(k) * kCols * r; };
  float* m = ef ? err.data() : data.data();
  for (auto _ : st) {
    for (int k = 0; k < kMatrices; ++k) {
      const ps::Pending pending =
          ef ? ps::Pending{fixed.p.data() + p_at(k), fixed.q.data() + q_at(k)} : ps::Pending{};
      ps::multiply_mq(data.data() + k * kPer, ef ? err.data() + k * kPer : nullptr, kRows, kCols,
                      fixed.q.data() + q_at(k), r, written.p.data() + p_at(k), pending);
    }
    for (int k = 0; k < kMatrices; ++k)
      ps::multiply_mtp(m + k * kPer, kRows, kCols, fixed.p.data() + p_at(k), r,
                       written.q.data() + q_at(k));
    for (int k = 0; k < kMatrices; ++k)
      ps::reconstruct(fixed.p.data() + p_at(k), fixed.q.data() + q_at(k), kRows, kCols, r,
                      data.data() + k * kPer, nullptr);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

// ef: 0 off, 1 on, 2 on with the error deferred (M = data + (last M - P' Q'^T);
// multiply_mq only).
void Ranks(benchmark::internal::Benchmark* b, int ef_forms) {
  b->ArgNames({"r", "ef"});
  for (int r : {1, 4})
    for (int ef = 0; ef < ef_forms; ++ef) b->Args({r, ef});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MultiplyMQ)->Apply([](benchmark::internal::Benchmark* b) { Ranks(b, 3); });
BENCHMARK(BM_MultiplyMTP)
    ->ArgNames({"r"})
    ->Arg(1)
    ->Arg(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Reconstruct)->Apply([](benchmark::internal::Benchmark* b) { Ranks(b, 2); });
BENCHMARK(BM_StepPasses)
    ->ArgNames({"r", "ef"})
    ->ArgsProduct({{1, 4}, {0, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
