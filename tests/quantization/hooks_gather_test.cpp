// per_channel_gather (FSDP2's weight all-gather) on 2 and 3 real processes
// over Gloo: every rank ends with every row equal, bit for bit, to that
// rank's row quantized and dequantized by PyTorch's per-channel formulas,
// computed here independently of the codec; the rows it does not own are
// never read; a row that is not whole channels ends in a shorter channel;
// the wire carries the codes (stats); a row with NaN on one rank falls back
// to a plain float32 gather or fails everywhere; a bucket that is not world
// equal rows is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/quantization/hooks_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::quant;

class Gather : public ::testing::TestWithParam<int> {};

// PyTorch's quint8 affine per-channel quantization then dequantization
// (PerChannelMinMaxObserver, quantize_per_channel, dequantize), in float32
// as PyTorch computes it: scale = max((max_pos - min_neg) / qmax, eps),
// zero_point = clamp(-round(min_neg / scale), 0, qmax),
// q = clamp(round(x / scale) + zero_point, 0, qmax), scale * (q - zero_point).
std::vector<float> torch_fake_quant(const std::vector<float>& x, size_t channel, int bits) {
  const float qmax = float((1 << bits) - 1);
  std::vector<float> out(x.size());
  for (size_t c0 = 0; c0 < x.size(); c0 += channel) {
    const size_t c1 = std::min(x.size(), c0 + channel);
    const float lo = *std::min_element(x.begin() + c0, x.begin() + c1);
    const float hi = *std::max_element(x.begin() + c0, x.begin() + c1);
    const float min_neg = std::min(lo, 0.0f), max_pos = std::max(hi, 0.0f);
    volatile float scale = (max_pos - min_neg) / qmax;  // volatile: no fused or wider math
    if (scale < FLT_EPSILON) scale = FLT_EPSILON;
    const float zp = std::clamp(0.0f - std::nearbyint(min_neg / scale), 0.0f, qmax);
    for (size_t i = c0; i < c1; ++i) {
      const float q = std::clamp(std::nearbyint(x[i] / scale) + zp, 0.0f, qmax);
      out[i] = scale * (q - zp);
    }
  }
  return out;
}

std::string options(int bits, size_t channel, const char* extra = "") {
  return "bits: " + std::to_string(bits) + ", channel_size: " + std::to_string(channel) + extra;
}

// The bucket of `rank`: its own row input(rank, 0, .), the others NaN, which
// the hook must not read (a NaN it read would make the row non-finite).
std::vector<float> bucket_of(int rank, int world, size_t row) {
  std::vector<float> x(size_t(world) * row, std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> own = inputs(rank, 0, row);
  std::copy(own.begin(), own.end(), x.begin() + size_t(rank) * row);
  return x;
}

TEST_P(Gather, EveryRankHoldsEveryRowAsItsRanksOwnQuantizationDecodes) {
  auto results = ddph_test::run_ranks(GetParam(), [&](int rank, int world, const std::string& dir) {
    // Rows of 5 channels of 512: [1024, 1536) is all negative (a clamped
    // zero point), [2048, 2560) constant (the eps scale); then rows of 5.2
    // channels, whose last channel is 100 (or 36, 4) elements long.
    struct Case {
      int bits;
      size_t channel, row;
    };
    for (const Case& c :
         {Case{8, 512, 5 * kChannel}, Case{4, 512, 5 * kChannel}, Case{4, 64, 5 * kChannel},
          Case{2, 512, 5 * kChannel}, Case{8, 512, 5 * kChannel + 100},
          Case{4, 64, 5 * kChannel + 100}, Case{2, 512, 5 * kChannel + 3}}) {
      const int bits = c.bits;
      const size_t channel = c.channel, row = c.row;
      ddph_session_t* s = ddph_test::open_session(
          yaml("per_channel_gather", options(bits, channel)), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "%d bits: open failed", bits);
      std::vector<float> x = bucket_of(rank, world, row);
      std::string msg;
      DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, 0, &msg) == DDPH_OK, "%d bits: %s", bits,
                       msg.c_str());
      for (int r = 0; r < world; ++r) {
        const std::vector<float> want = torch_fake_quant(inputs(r, 0, row), channel, bits);
        const float* got = x.data() + size_t(r) * row;
        for (size_t i = 0; i < row; ++i)
          DDPH_CHILD_CHECK(std::memcmp(&got[i], &want[i], sizeof(float)) == 0,
                           "%d bits, channel %zu, row %zu: row %d [%zu] = %.9g, PyTorch's %.9g",
                           bits, channel, row, r, i, got[i], want[i]);
        DDPH_CHILD_CHECK(!std::equal(got, got + row, inputs(r, 0, row).begin()),
                         "row %d is not quantized", r);
      }
      // The wire: this rank's row in, its codes, scales and header out.
      ddph_stats_t st{};
      st.struct_size = sizeof st;
      ddph_error_free(ddph_session_stats(s, &st));
      // A scale and a zero point (two floats) per channel, the codes
      // bit-packed, the block padded to 8 bytes.
      const size_t channels = (row + channel - 1) / channel;
      const size_t codes = (row * size_t(bits) + 7) / 8;
      DDPH_CHILD_CHECK(st.bytes_in == row * 4, "bytes_in %llu", (unsigned long long)st.bytes_in);
      DDPH_CHILD_CHECK(st.bytes_out == 8 + channels * 8 + (codes + 7) / 8 * 8, "bytes_out %llu",
                       (unsigned long long)st.bytes_out);
      ddph_session_close(s);
    }
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST_P(Gather, ARowWithNaNFallsBackToFloat32OrFailsOnEveryRank) {
  auto results = ddph_test::run_ranks(GetParam(), [&](int rank, int world, const std::string& dir) {
    const size_t row = kChannel;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const char* mode : {"propagate", "error"}) {
      ddph_session_t* s = ddph_test::open_session(
          yaml("per_channel_gather", options(8, 512, ", nonfinite: ") + mode), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open failed");
      std::vector<float> x = bucket_of(rank, world, row);
      if (rank == 1) x[row + 7] = nan;
      std::string msg;
      const ddph_code_t code = run_bucket_msg(s, x, 0, 0, &msg);
      if (std::string(mode) == "error") {
        DDPH_CHILD_CHECK(code == DDPH_NONFINITE && msg.find("rank 1") != std::string::npos &&
                             msg.find("nonfinite") != std::string::npos,
                         "code %d: %s", int(code), msg.c_str());
      } else {
        DDPH_CHILD_CHECK(code == DDPH_OK, "%s", msg.c_str());
        for (int r = 0; r < world; ++r) {
          std::vector<float> want = inputs(r, 0, row);
          if (r == 1) want[7] = nan;
          DDPH_CHILD_CHECK(std::memcmp(x.data() + size_t(r) * row, want.data(), row * 4) == 0,
                           "row %d is not the float32 row", r);
        }
      }
      ddph_session_close(s);
    }
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST_P(Gather, RefusesABucketThatIsNotWorldEqualRows) {
  auto results = ddph_test::run_ranks(GetParam(), [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(yaml("per_channel_gather", options(8, 512)), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    for (size_t n : {size_t(world) * kChannel + 1, size_t(world) * 100 + size_t(world) - 1}) {
      std::vector<float> x(n, 1.0f);
      const std::vector<float> before = x;
      std::string msg;
      DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, 0, &msg) == DDPH_INVALID_ARGUMENT,
                       "%zu elements accepted", n);
      DDPH_CHILD_CHECK(
          msg.find("per_channel_gather") != std::string::npos &&
              msg.find(std::to_string(n) + " elements") != std::string::npos &&
              msg.find("world size " + std::to_string(world) + " equal rows") != std::string::npos,
          "message: %s", msg.c_str());
      DDPH_CHILD_CHECK(x == before, "the refused bucket changed");
    }
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(GatherOptions, RefusesBitsTheKernelsDoNotKnow) {
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(yaml("per_channel_gather", options(3, 512)), rank, world, dir);
    DDPH_CHILD_CHECK(s == nullptr, "bits 3 accepted");
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Worlds, Gather, ::testing::Values(2, 3));

}  // namespace
