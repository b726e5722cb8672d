// Google Benchmark timings of the quantization kernels on a 25 MB fp32
// bucket, beside a memcpy of the same 25 MB in the same binary (issue 3's
// goal: per-channel 8-bit quantize at >= 50% of memcpy bandwidth). Not a
// test; run build/bin/ddph_bench_quant. Wall-clock time (memory
// bandwidth is what is compared). Bytes/s counts the fp32 bucket's
// bytes for quantize and dequantize, and the codes' bytes for pack/unpack.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/divide.h"
#include "core/kernels/isa.h"
#include "core/quant/kernels/quant_cpu.h"
#include "core/quant/wire_segment.h"
#include "tests/support/bench_isa_level.h"
#include "tests/support/bench_memcpy.h"

namespace {

using ddph::Isa;
namespace q = ddph::quantization;
namespace qz = ddph::quantization;

constexpr size_t kBytes = 25u << 20;
constexpr size_t kFloats = kBytes / 4;
constexpr size_t kChannel = 512;

std::vector<float> make_floats() {
  std::vector<float> v(kFloats);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i)) * 1e-2f;
  return v;
}

using Level = ddph_test::BenchIsaLevel;

// Pushes everything out of the caches (the 32 MB L3 would otherwise keep a
// 25 MB bucket between iterations) with 100 MB of writes: a hook finds its
// buffers out of the caches, last touched a bucket ago.
class CacheFlush {
 public:
  void operator()() {
    for (float& v : other_) v += 1.0f;
    benchmark::DoNotOptimize(other_.data());
  }

 private:
  std::vector<float> other_ = std::vector<float>(4 * kFloats, 1.0f);
};

void BM_Memcpy(benchmark::State& st) {
  ddph_test::bench_memcpy(st, make_floats());
}

// The 25 MB bucket, its codes and params, and 8-bit nearest per-channel
// arguments over them, for the quantize benchmarks to adjust.
struct QuantizeInputs {
  QuantizeInputs()
      : x(make_floats()), codes(kFloats, 1), params(q::num_channels(kFloats, kChannel)) {
    args.x = x.data();
    args.n = kFloats;
    args.channel = kChannel;
    args.qmax = 255;
    args.seed = 1;
    args.params = params.data();
    args.q = codes.data();
  }
  const std::vector<float> x;
  std::vector<uint8_t> codes;
  std::vector<q::QParams> params;
  q::QuantizeArgs args;
};

// range(1): bits; range(2): 1 for stochastic rounding; range(3): error feedback, 0 off, 1 in
// place (a finite check pass first), 2 out of place (as the hooks run it).
void BM_Quantize(benchmark::State& st) {
  Level level(st);
  QuantizeInputs in;
  std::vector<float> residual(kFloats, 0.0f), residual_out(kFloats, 0.0f);
  q::QuantizeArgs& a = in.args;
  a.qmax = (1 << st.range(1)) - 1;
  a.stochastic = st.range(2) != 0;
  a.residual = st.range(3) != 0 ? residual.data() : nullptr;
  a.residual_out = st.range(3) == 2 ? residual_out.data() : a.residual;
  for (auto _ : st) {
    if (!q::quantize_channels(a)) st.SkipWithError("non-finite");
    benchmark::DoNotOptimize(in.codes.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

// As the hooks run it: the bucket was last written before the hook, out of
// the caches (BM_DequantizeInto flushes them the same way).
void BM_QuantizeCold(benchmark::State& st) {
  Level level(st);
  QuantizeInputs in;
  CacheFlush flush;
  for (auto _ : st) {
    st.PauseTiming();
    flush();
    st.ResumeTiming();
    if (!q::quantize_channels(in.args)) st.SkipWithError("non-finite");
    benchmark::DoNotOptimize(in.codes.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

void BM_DequantizeAdd(benchmark::State& st) {
  Level level(st);
  std::vector<uint8_t> codes(kFloats);
  for (size_t i = 0; i < kFloats; ++i) codes[i] = uint8_t(i * 31);
  std::vector<q::QParams> params(q::num_channels(kFloats, kChannel), q::QParams{1e-9f, 128.0f});
  std::vector<float> acc(kFloats, 0.0f);
  for (auto _ : st) {
    q::dequantize_add(codes.data(), kFloats, kChannel, params.data(), acc.data());
    benchmark::DoNotOptimize(acc.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

// The hooks' last pass: every rank decodes the whole bucket into it. In a
// hook the bucket was last touched before the exchanges, so each timed
// decode starts with it out of the caches (the 32 MB L3 would otherwise
// keep all 25 MB between iterations).
void BM_DequantizeInto(benchmark::State& st) {
  Level level(st);
  std::vector<uint8_t> codes(kFloats);
  for (size_t i = 0; i < kFloats; ++i) codes[i] = uint8_t(i * 31);
  std::vector<q::QParams> params(q::num_channels(kFloats, kChannel), q::QParams{1e-9f, 128.0f});
  std::vector<float> out(kFloats, 0.0f);
  CacheFlush flush;
  for (auto _ : st) {
    st.PauseTiming();
    flush();
    st.ResumeTiming();
    q::dequantize_into(codes.data(), kFloats, kChannel, params.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kBytes));
}

void BM_Pack(benchmark::State& st) {
  Level level(st);
  const int bits = int(st.range(1));
  std::vector<uint8_t> codes(kFloats), packed(q::packed_bytes(kFloats, bits));
  for (size_t i = 0; i < kFloats; ++i) codes[i] = uint8_t(i % (1u << bits));
  for (auto _ : st) {
    q::pack(codes.data(), kFloats, bits, packed.data());
    benchmark::DoNotOptimize(packed.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kFloats));
}

void BM_Unpack(benchmark::State& st) {
  Level level(st);
  const int bits = int(st.range(1));
  std::vector<uint8_t> codes(kFloats), packed(q::packed_bytes(kFloats, bits), 0x5B);
  for (auto _ : st) {
    q::unpack(packed.data(), kFloats, bits, codes.data());
    benchmark::DoNotOptimize(codes.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(kFloats));
}

// The owner's step in the reduce_scatter protocol at W = 4, 8 bits: a
// quarter of the bucket from each of 4 ranks, whose mean it forms (and
// re-quantizes, in BM_OwnerMeanEncoded). Bytes/s counts the mean's fp32
// bytes. The caches are flushed before each timed step, as
// BM_DequantizeInto does: in the hook the owner's buffers were last touched
// a bucket ago.
struct OwnerInputs {
  static constexpr size_t kWorld = 4;
  OwnerInputs() : params(qz::segment_channels(seg)), codes(seg.n), encoded(kWorld) {
    const std::vector<float> x = make_floats();
    qz::CodecScratch s = scratch();
    for (size_t k = 0; k < kWorld; ++k) {
      encoded[k].resize(qz::encoded_bytes(seg, 8));
      qz::encode_segment(x.data() + k * seg.n, seg, qz::EncodeArgs{}, encoded[k].data(), s);
      ins.push_back(encoded[k].data());
    }
  }
  qz::CodecScratch scratch() { return qz::CodecScratch{params.data(), codes.data()}; }

  const qz::Segment seg{kFloats / kWorld, kChannel};
  std::vector<q::QParams> params;
  std::vector<uint8_t> codes;
  std::vector<std::vector<uint8_t>> encoded;
  std::vector<const uint8_t*> ins;
  CacheFlush flush;
};

// range(0): 1 for decode_mean (a channel at a time), 0 for the
// whole-segment passes it replaced (zero, 4 x decode_add, divide).
void BM_OwnerMean(benchmark::State& st) {
  OwnerInputs in;
  qz::CodecScratch scratch = in.scratch();
  std::vector<float> mean(in.seg.n);
  for (auto _ : st) {
    st.PauseTiming();
    in.flush();
    st.ResumeTiming();
    if (st.range(0) == 1) {
      qz::decode_mean(in.ins.data(), in.kWorld, in.seg, 8, int(in.kWorld), mean.data(), scratch);
    } else {
      std::memset(mean.data(), 0, in.seg.n * sizeof(float));
      for (const uint8_t* e : in.ins) qz::decode_add(e, in.seg, 8, mean.data(), scratch);
      ddph::divide_inplace(ddph::DType::F32, mean.data(), in.seg.n, int64_t(in.kWorld));
    }
    benchmark::DoNotOptimize(mean.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(in.seg.n * sizeof(float)));
}

// range(0): 1 for encode_mean (a group of channels summed and re-quantized
// while in L1), 0 for decode_mean into a buffer and encode_segment of it.
void BM_OwnerMeanEncoded(benchmark::State& st) {
  OwnerInputs in;
  qz::CodecScratch scratch = in.scratch();
  std::vector<float> mean(in.seg.n);
  std::vector<uint8_t> out(qz::encoded_bytes(in.seg, 8));
  const qz::EncodeArgs nearest;
  for (auto _ : st) {
    st.PauseTiming();
    in.flush();
    st.ResumeTiming();
    bool finite;
    if (st.range(0) == 1) {
      finite = qz::encode_mean(in.ins.data(), in.kWorld, in.seg, int(in.kWorld), nearest,
                               out.data(), mean.data(), scratch);
    } else {
      qz::decode_mean(in.ins.data(), in.kWorld, in.seg, 8, int(in.kWorld), mean.data(), scratch);
      finite = qz::encode_segment(mean.data(), in.seg, nearest, out.data(), scratch);
    }
    if (!finite) st.SkipWithError("non-finite");
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(in.seg.n * sizeof(float)));
}

void levels(benchmark::internal::Benchmark* b, std::vector<std::vector<int64_t>> rest) {
  for (int i = 0; i <= int(Isa::kAvx512); ++i) {
    for (auto r : rest) {
      r.insert(r.begin(), i);
      b->Args(r);
    }
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

// range(0): 0 for the passes a fused kernel replaced, 1 for it.
void old_and_fused(benchmark::internal::Benchmark* b) {
  b->ArgNames({"fused"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Quantize)->ArgNames({"isa", "bits", "stochastic", "ef"})->Apply([](auto* b) {
  levels(b, {{8, 0, 0}, {4, 0, 0}, {8, 1, 0}, {4, 0, 1}, {4, 0, 2}});
});
BENCHMARK(BM_QuantizeCold)->ArgNames({"isa"})->Apply([](auto* b) { levels(b, {{}}); });
BENCHMARK(BM_DequantizeAdd)->ArgNames({"isa"})->Apply([](auto* b) { levels(b, {{}}); });
BENCHMARK(BM_DequantizeInto)->ArgNames({"isa"})->Apply([](auto* b) { levels(b, {{}}); });
BENCHMARK(BM_OwnerMean)->Apply(old_and_fused);
BENCHMARK(BM_OwnerMeanEncoded)->Apply(old_and_fused);
BENCHMARK(BM_Pack)->ArgNames({"isa", "bits"})->Apply([](auto* b) { levels(b, {{4}, {2}}); });
BENCHMARK(BM_Unpack)->ArgNames({"isa", "bits"})->Apply([](auto* b) { levels(b, {{4}, {2}}); });

}  // namespace

BENCHMARK_MAIN();
