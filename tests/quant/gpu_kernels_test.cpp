// Every CUDA kernel of quant_cuda.h against its CPU twin of quant_cpu.h, bit
// for bit, on the same inputs: the shared stress buckets (awkward lengths,
// constant, all-negative, ties, tiny and huge values), all bit widths, both
// roundings, with and without error feedback, and channels longer than a
// block's tile. Without a usable GPU every test skips with one line saying
// why, so the binary is safe to run in CI (libcudart loads the driver
// lazily; none is needed to start). The one exception is CudaTiling: plain
// host arithmetic of how the kernels split a bucket, so CI checks it too.
//
// The one allowed difference is a NaN's payload: x86 makes 0xFFC00000 where
// the GPU makes 0x7FFFFFFF (IEEE leaves it open), e.g. inf * 0 when a huge
// bucket's scale overflows. Floats therefore compare as "same bits, or both
// NaN"; everything else compares byte for byte.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/divide.h"
#include "core/quant/kernels/quant_cpu.h"
#include "core/quant/kernels/quant_cuda.h"
#include "core/quant/kernels/quant_tiles_cuda.h"
#include "core/quant/rank_header.h"
#include "core/quant/wire_segment.h"
#include "tests/quant/kernels_test_data.h"
#include "tests/support/cuda_device.h"

namespace {

namespace q = ddph::quantization;
using ddph::quantization::QParams;

using ddph_test::DeviceVec;

bool same_float(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub || (std::isnan(a) && std::isnan(b));
}

// Index of the first element where the vectors differ, or size() if none.
size_t first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  size_t i = 0;
  while (i < a.size() && same_float(a[i], b[i])) ++i;
  return i;
}
size_t first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  return i;
}
size_t first_diff(const std::vector<QParams>& a, const std::vector<QParams>& b) {
  size_t i = 0;
  while (i < a.size() && same_float(a[i].scale, b[i].scale) &&
         same_float(a[i].zero_point, b[i].zero_point))
    ++i;
  return i;
}

#define EXPECT_SAME(cpu, gpu, what)                                                    \
  do {                                                                                 \
    ASSERT_EQ((cpu).size(), (gpu).size()) << (what);                                   \
    const size_t at = first_diff((cpu), (gpu));                                        \
    EXPECT_EQ(at, (cpu).size()) << (what) << ": GPU differs from CPU at index " << at; \
  } while (0)

class GpuQuantKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    DDPH_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // One quantize step on both sides from the same x and residual, compared;
  // *residual then holds the CPU's updated residual for the next step.
  void quantize_both(const std::string& what, const std::vector<float>& x, size_t channel, int qmax,
                     bool stochastic, uint64_t counter_base,
                     std::vector<float>* residual /* nullptr: no error feedback */) {
    const size_t n = x.size();
    const size_t nch = q::num_channels(n, channel);
    q::QuantizeArgs a;
    a.x = x.data();
    a.n = n;
    a.channel = channel;
    a.qmax = qmax;
    a.stochastic = stochastic;
    a.seed = 0x5EEDull + uint64_t(qmax);
    a.counter_base = counter_base;
    std::vector<float> cpu_res = residual ? *residual : std::vector<float>();
    std::vector<QParams> cpu_params(nch);
    std::vector<uint8_t> cpu_q(n);
    a.residual = residual ? cpu_res.data() : nullptr;
    a.params = cpu_params.data();
    a.q = cpu_q.data();
    const bool cpu_ok = q::quantize_channels(a);

    DeviceVec<float> d_x(x);
    DeviceVec<float> d_res(residual ? *residual : std::vector<float>());
    DeviceVec<QParams> d_params(nch);
    DeviceVec<uint8_t> d_q(n);
    DeviceVec<uint8_t> d_ok(1);
    q::QuantizeArgs g = a;
    g.x = d_x.get();
    g.residual = residual ? d_res.get() : nullptr;
    g.params = d_params.get();
    g.q = d_q.get();
    ASSERT_EQ(q::quantize_channels_cuda(g, d_ok.get(), stream_), cudaSuccess) << what;
    const bool gpu_ok = d_ok.host(stream_)[0] == 1;

    ASSERT_EQ(gpu_ok, cpu_ok) << what << ": all_finite flag";
    if (residual) {
      EXPECT_SAME(cpu_res, d_res.host(stream_), what + " residual");
      *residual = cpu_res;
    }
    if (!cpu_ok) return;  // q and params are unspecified
    EXPECT_SAME(cpu_params, d_params.host(stream_), what + " params");
    EXPECT_SAME(cpu_q, d_q.host(stream_), what + " codes");
  }

  cudaStream_t stream_ = nullptr;
};

std::string label(const std::string& name, size_t channel, int qmax, bool sr, bool ef) {
  return name + " channel=" + std::to_string(channel) + " qmax=" + std::to_string(qmax) +
         (sr ? " stochastic" : " nearest") + (ef ? " ef" : "");
}

TEST_F(GpuQuantKernels, QuantizeMatchesCpu) {
  for (const auto& c : ddph_test::quant_cases())
    for (int qmax : {255, 15, 3})
      for (bool sr : {false, true})
        for (bool ef : {false, true}) {
          const std::string what = label(c.name, c.channel, qmax, sr, ef);
          // Two steps, so the second quantizes x plus a real residual.
          std::vector<float> res(c.x.size(), 0.0f);
          quantize_both(what + " step 1", c.x, c.channel, qmax, sr, 0, ef ? &res : nullptr);
          quantize_both(what + " step 2", c.x, c.channel, qmax, sr, c.x.size(),
                        ef ? &res : nullptr);
          if (HasFatalFailure()) return;
        }
}

// Finite values past PyTorch's formulas (quant_math.h's qparams_wide,
// ef_value's saturation; with error feedback, x + r past FLT_MAX): the GPU
// follows the CPU's rule bit for bit.
TEST_F(GpuQuantKernels, HugeValuesQuantizeAsOnTheCpu) {
  for (const auto& c : ddph_test::huge_quant_cases())
    for (int qmax : {255, 15, 3})
      for (bool sr : {false, true})
        for (bool ef : {false, true}) {
          const std::string what = label(c.name, c.channel, qmax, sr, ef);
          std::vector<float> res(c.x.size(), 0.0f);
          for (size_t i = 0; i < res.size(); i += 3) res[i] = c.x[i] / 3;  // x + r overflows
          quantize_both(what + " step 1", c.x, c.channel, qmax, sr, 0, ef ? &res : nullptr);
          quantize_both(what + " step 2", c.x, c.channel, qmax, sr, c.x.size(),
                        ef ? &res : nullptr);
          if (HasFatalFailure()) return;
        }
}

// The float32 mean of encodings (zero, dequantize_add each, divide) fixed
// by wide_means_cuda equals wire_segment.h's decode_mean, whose channels
// past FLT_MAX are summed in double: packed and byte-aligned channels, a
// chunk of channels in the middle of a gathered buffer.
TEST_F(GpuQuantKernels, WideMeansMatchDecodeMean) {
  namespace qz = ddph::quantization;
  for (int bits : {8, 4, 2})
    for (size_t channel : {size_t(512), size_t(511), size_t(0)}) {
      const qz::Segment s{2600, channel};
      const size_t bytes = qz::encoded_bytes(s, bits), stride = bytes + 8;
      const int world = 3;
      std::vector<uint8_t> all(stride * world);
      std::vector<QParams> params(qz::segment_channels(s));
      std::vector<uint8_t> codes(s.n);
      qz::CodecScratch scratch{params.data(), codes.data()};
      qz::EncodeArgs args;
      args.bits = bits;
      std::vector<const uint8_t*> ins;
      for (int k = 0; k < world; ++k) {
        std::vector<float> x = ddph_test::normal_floats(s.n, uint32_t(40 + k), 1.0f);
        for (size_t i = 0; i < 700; ++i) x[i] = 3e38f;
        for (size_t i = 700; i < 1200; ++i) x[i] = (i + size_t(k)) % 2 ? FLT_MAX : -FLT_MAX;
        ASSERT_TRUE(qz::encode_segment(x.data(), s, args, all.data() + k * stride, scratch));
        ins.push_back(all.data() + k * stride);
      }
      std::vector<float> cpu(s.n);
      qz::decode_mean(ins.data(), ins.size(), s, bits, world, cpu.data(), scratch);

      DeviceVec<uint8_t> d_all(all);
      DeviceVec<uint8_t> d_codes(s.n);
      DeviceVec<float> d_out(s.n);
      const size_t head = qz::params_bytes(s);
      for (int k = 0; k < world; ++k) {
        const uint8_t* in = d_all.get() + k * stride;
        const uint8_t* q = in + head;
        if (bits != 8) {
          ASSERT_EQ(q::unpack_cuda(q, s.n, bits, d_codes.get(), stream_), cudaSuccess);
          q = d_codes.get();
        }
        ASSERT_EQ(q::dequantize_add_cuda(q, s.n, s.channel, reinterpret_cast<const QParams*>(in),
                                         d_out.get(), stream_),
                  cudaSuccess);
      }
      // The divide is core's, the same bits on host and GPU: the host's here.
      std::vector<float> sum = d_out.host(stream_);
      ddph::divide_inplace(ddph::DType::F32, sum.data(), sum.size(), world);
      DeviceVec<float> d_mean(sum);
      ASSERT_EQ(q::wide_means_cuda(d_all.get(), stride, world, s.n, s.channel, head, bits, world,
                                   d_mean.get(), stream_),
                cudaSuccess);
      const std::vector<float> gpu = d_mean.host(stream_);
      for (float v : gpu) ASSERT_TRUE(std::isfinite(v));
      EXPECT_SAME(cpu, gpu, "bits " + std::to_string(bits) + " channel " + std::to_string(channel));
    }
}

// Channel lengths around the kernels' tile (2048 elements a block), the
// "0 means whole bucket" spelling, tiny channels, and a 64-bit counter.
TEST_F(GpuQuantKernels, QuantizeAnyChannelLength) {
  const std::vector<float> x = ddph_test::normal_floats(70001, 21, 1.0f, 0.25f);
  for (size_t channel : {size_t(0), size_t(1), size_t(7), size_t(100), size_t(2047), size_t(2048),
                         size_t(2049), size_t(3000), size_t(70000), size_t(1) << 20})
    for (bool sr : {false, true}) {
      std::vector<float> res(x.size(), 0.0f);
      const std::string what = label("normal_70001", channel, 255, sr, true);
      quantize_both(what, x, channel, 255, sr, (uint64_t(1) << 33) + 5, &res);
      quantize_both(what + " again", x, channel, 15, sr, 0, &res);
      if (HasFatalFailure()) return;
    }
}

// More tiles than the grid's cap (tiles::kMaxGridBlocks): channel 1 makes a
// tile of every element, so each block takes several trips round the tile
// loop, and the min/max kernel reuses its CUB storage between them.
TEST_F(GpuQuantKernels, MoreTilesThanTheGridLoopOverThem) {
  namespace t = ddph::quantization::tiles;
  const size_t n = t::kMaxGridBlocks * 2 + 4099;
  const std::vector<float> x = ddph_test::normal_floats(n, 23, 1.0f, 0.25f);
  for (bool sr : {false, true}) {
    std::vector<float> res(n, 0.0f);
    const std::string what = label("normal_2M", 1, 255, sr, true);
    quantize_both(what, x, 1, 255, sr, 0, &res);
    quantize_both(what + " again", x, 1, 15, sr, n, &res);
    if (HasFatalFailure()) return;
  }
  std::vector<QParams> params(n);
  std::vector<uint8_t> codes(n);
  for (size_t i = 0; i < n; ++i) {
    params[i] = QParams{1e-3f * float(1 + i % 7), float(i % 256)};
    codes[i] = uint8_t(i * 31);
  }
  const std::vector<float> acc0 = ddph_test::normal_floats(n, 24, 2.0f);
  std::vector<float> cpu_into(n), cpu_add = acc0;
  q::dequantize_into(codes.data(), n, 1, params.data(), cpu_into.data());
  q::dequantize_add(codes.data(), n, 1, params.data(), cpu_add.data());
  DeviceVec<uint8_t> d_codes(codes);
  DeviceVec<QParams> d_params(params);
  DeviceVec<float> d_into(n), d_add(acc0);
  ASSERT_EQ(q::dequantize_into_cuda(d_codes.get(), n, 1, d_params.get(), d_into.get(), stream_),
            cudaSuccess);
  ASSERT_EQ(q::dequantize_add_cuda(d_codes.get(), n, 1, d_params.get(), d_add.get(), stream_),
            cudaSuccess);
  EXPECT_SAME(cpu_into, d_into.host(stream_), "channel 1, 2M elements: dequantize_into");
  EXPECT_SAME(cpu_add, d_add.host(stream_), "channel 1, 2M elements: dequantize_add");
}

TEST_F(GpuQuantKernels, EmptyBucketGetsEpsilonParams) {
  quantize_both("empty", {}, 512, 255, false, 0, nullptr);
}

// A NaN or Inf anywhere (or an x + residual that overflows) clears the flag
// on both sides and leaves the residual untouched.
TEST_F(GpuQuantKernels, NonFiniteLeavesResidual) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t at : {size_t(0), size_t(511), size_t(512), size_t(4000), size_t(5002)})
    for (float bad : {nan, inf, -inf})
      for (bool ef : {false, true}) {
        std::vector<float> x = ddph_test::normal_floats(5003, 31, 1.0f);
        x[at] = bad;
        std::vector<float> res = ddph_test::normal_floats(x.size(), 32, 1e-3f);
        const std::string what = "bad at " + std::to_string(at) + " = " + std::to_string(bad);
        quantize_both(what, x, 512, 255, false, 0, ef ? &res : nullptr);
        quantize_both(what + " per-tensor", x, 0, 255, true, 0, ef ? &res : nullptr);
      }
  std::vector<float> x(1000, 3e38f);
  std::vector<float> res(1000, 3e38f);  // finite alone, infinite summed
  quantize_both("overflowing sum", x, 512, 255, false, 0, &res);
}

TEST_F(GpuQuantKernels, DequantizeMatchesCpu) {
  for (const auto& c : ddph_test::quant_cases())
    for (int qmax : {255, 15, 3}) {
      const std::string what = label(c.name, c.channel, qmax, false, false);
      const size_t n = c.x.size();
      std::vector<QParams> params(q::num_channels(n, c.channel));
      std::vector<uint8_t> codes(n);
      q::QuantizeArgs a;
      a.x = c.x.data();
      a.n = n;
      a.channel = c.channel;
      a.qmax = qmax;
      a.params = params.data();
      a.q = codes.data();
      if (!q::quantize_channels(a)) continue;
      const std::vector<float> acc0 = ddph_test::normal_floats(n, 41, 2.0f);

      std::vector<float> cpu_into(n), cpu_add = acc0;
      q::dequantize_into(codes.data(), n, c.channel, params.data(), cpu_into.data());
      q::dequantize_add(codes.data(), n, c.channel, params.data(), cpu_add.data());

      DeviceVec<uint8_t> d_codes(codes);
      DeviceVec<QParams> d_params(params);
      DeviceVec<float> d_into(n), d_add(acc0);
      ASSERT_EQ(q::dequantize_into_cuda(d_codes.get(), n, c.channel, d_params.get(), d_into.get(),
                                        stream_),
                cudaSuccess);
      ASSERT_EQ(
          q::dequantize_add_cuda(d_codes.get(), n, c.channel, d_params.get(), d_add.get(), stream_),
          cudaSuccess);
      EXPECT_SAME(cpu_into, d_into.host(stream_), what + " dequantize_into");
      EXPECT_SAME(cpu_add, d_add.host(stream_), what + " dequantize_add");
    }
}

// Codes over the whole byte range, so the masking to `bits` is compared too.
TEST_F(GpuQuantKernels, PackAndUnpackMatchCpu) {
  std::mt19937 gen(51);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t n : {0, 1, 2, 3, 4, 5, 7, 511, 512, 513, 4099, 70001, 1 << 20})
    for (int bits : {8, 4, 2}) {
      const std::string what = "n=" + std::to_string(n) + " bits=" + std::to_string(bits);
      std::vector<uint8_t> codes(n);
      for (auto& v : codes) v = uint8_t(byte(gen));
      const size_t bytes = q::packed_bytes(n, bits);
      std::vector<uint8_t> cpu_packed(bytes), cpu_unpacked(n);
      q::pack(codes.data(), n, bits, cpu_packed.data());
      std::vector<uint8_t> wire(bytes);
      for (auto& v : wire) v = uint8_t(byte(gen));
      q::unpack(wire.data(), n, bits, cpu_unpacked.data());

      DeviceVec<uint8_t> d_codes(codes), d_packed(bytes), d_wire(wire), d_unpacked(n);
      ASSERT_EQ(q::pack_cuda(d_codes.get(), n, bits, d_packed.get(), stream_), cudaSuccess);
      ASSERT_EQ(q::unpack_cuda(d_wire.get(), n, bits, d_unpacked.get(), stream_), cudaSuccess);
      EXPECT_SAME(cpu_packed, d_packed.host(stream_), what + " pack");
      EXPECT_SAME(cpu_unpacked, d_unpacked.host(stream_), what + " unpack");
    }
}

TEST_F(GpuQuantKernels, AllFiniteMatchesCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float max = std::numeric_limits<float>::max();
  for (size_t n : {0, 1, 513, 70001})
    for (float bad : {0.0f, max, -max, nan, -nan, inf, -inf})
      for (size_t at : {size_t(0), n / 2, n - 1}) {
        if (n == 0 && at != 0) continue;
        std::vector<float> x = ddph_test::normal_floats(n, 61, 1.0f);
        if (n != 0) x[at] = bad;
        const bool cpu = q::all_finite(x.data(), n);
        DeviceVec<float> d_x(x);
        DeviceVec<uint8_t> d_flag(1);
        ASSERT_EQ(q::all_finite_cuda(d_x.get(), n, d_flag.get(), stream_), cudaSuccess);
        EXPECT_EQ(d_flag.host(stream_)[0] == 1, cpu) << "n=" << n << " x[" << at << "]=" << bad;
      }
}

// The hooks' two flag kernels give the bytes of the host codec functions
// they stand in for: the rank header from a bool, encode_nan.
TEST_F(GpuQuantKernels, RankHeaderFromFlagsMatchesTheHostHeader) {
  namespace hq = ddph::quantization;
  const std::vector<std::vector<uint8_t>> cases = {{}, {1}, {0}, {1, 1, 1}, {1, 0, 1}, {0, 0}};
  for (const std::vector<uint8_t>& flags : cases) {
    bool finite = true;
    for (uint8_t f : flags) finite &= f == 1;
    std::vector<uint8_t> cpu(hq::kRankHeaderBytes);
    hq::write_rank_header(cpu.data(), finite);
    DeviceVec<uint8_t> d_flags(flags);
    DeviceVec<uint8_t> d_out(std::vector<uint8_t>(hq::kRankHeaderBytes, 0xAB));  // no stale byte
    ASSERT_EQ(q::not_all_flags_cuda(d_flags.get(), flags.size(), d_out.get(), hq::kRankHeaderBytes,
                                    stream_),
              cudaSuccess);
    EXPECT_SAME(cpu, d_out.host(stream_), "flags " + std::to_string(flags.size()));
  }
}

TEST_F(GpuQuantKernels, NanUnlessFiniteMatchesEncodeNan) {
  namespace hq = ddph::quantization;
  for (size_t n : {1, 513, 5000})
    for (size_t channel : {size_t(512), n})
      for (int bits : {8, 4, 2}) {
        const hq::Segment seg{n, channel};
        const size_t bytes = hq::encoded_bytes(seg, bits), head = hq::params_bytes(seg);
        std::vector<uint8_t> cpu(bytes, 0x5A);
        hq::encode_nan(seg, bits, cpu.data());
        const std::vector<uint8_t> before(bytes, 0x5A);
        for (uint8_t finite : {0, 1}) {
          DeviceVec<uint8_t> d_out(before);
          DeviceVec<uint8_t> d_flag(std::vector<uint8_t>{finite});
          ASSERT_EQ(q::nan_unless_finite_cuda(d_flag.get(), reinterpret_cast<QParams*>(d_out.get()),
                                              hq::segment_channels(seg), bytes - head, stream_),
                    cudaSuccess);
          const std::string what = "n=" + std::to_string(n) +
                                   " channel=" + std::to_string(channel) +
                                   " bits=" + std::to_string(bits);
          EXPECT_SAME(finite ? before : cpu, d_out.host(stream_), what);
        }
      }
}

// Every element lies in exactly one block, inside its own channel, and no
// block gets more than a tile: the kernels rely on it for coverage and for
// loading one channel's QParams per block.
TEST(CudaTiling, EveryElementInOneBlockOfItsChannel) {
  namespace t = ddph::quantization::tiles;
  for (size_t n : {0, 1, 2, 511, 512, 513, 2047, 2048, 2049, 4099, 70001})
    for (size_t channel : {0, 1, 3, 100, 512, 2047, 2048, 2049, 3000, 4096, 70000, 1 << 20}) {
      const t::Tiles tiles = t::make_tiles(n, channel);
      const size_t resolved = channel == 0 ? n : channel;
      std::vector<int> cover(n, 0);
      for (size_t b = 0; b < tiles.blocks; ++b) {
        const t::Range r = t::tile_range(tiles, b);
        if (r.begin >= r.end) continue;
        ASSERT_LE(r.end - r.begin, t::kTile);
        ASSERT_EQ(r.begin / resolved, r.c) << "n=" << n << " channel=" << channel;
        ASSERT_EQ((r.end - 1) / resolved, r.c) << "n=" << n << " channel=" << channel;
        for (size_t i = r.begin; i < r.end; ++i) ++cover[i];
      }
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(cover[i], 1) << "n=" << n << " channel=" << channel << " element " << i;
    }
}

// A launch never asks for more blocks than gridDim.x allows: channel_size 1
// on a bucket of 2^31 elements is 2^31 tiles, which the kernels then cover
// in a loop over tiles (this used to fail with cudaErrorInvalidValue).
TEST(CudaTiling, TheGridFitsWhateverTheTileCount) {
  namespace t = ddph::quantization::tiles;
  const t::Tiles huge = t::make_tiles(size_t(1) << 31, 1);
  ASSERT_EQ(huge.blocks, size_t(1) << 31);
  EXPECT_GE(t::grid_blocks(huge), 1u);
  EXPECT_LE(size_t(t::grid_blocks(huge)), size_t(INT_MAX));
  EXPECT_LT(size_t(t::grid_blocks(huge)), huge.blocks);
  const t::Tiles small = t::make_tiles(70001, 512);
  EXPECT_EQ(size_t(t::grid_blocks(small)), small.blocks);
}

}  // namespace
