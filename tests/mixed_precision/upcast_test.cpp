// mixed_precision/allreduce_upcast on real Gloo ranks. Each rank's bucket
// holds bf16 or fp16 gradients (random bit patterns, decoded here by
// formula, independently of ddphooks' casts); the hook must leave in each
// parameter's fp32 gradient the mean of the ranks' upcast gradients, within
// the precision of the bucket's dtype, and on two ranks exactly what
// PyTorch computes: (a + b).div_(2) in that dtype, then .float().
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace {

const std::vector<std::vector<int64_t>> kShapes = {{4, 5}, {7}, {3, 3}};
constexpr size_t kN = 20 + 7 + 9;

enum class Low { kBF16, kF16 };
const char* low_name(Low l) {
  return l == Low::kBF16 ? "bf16" : "f16";
}

// Gradient bits of rank r, element i: magnitudes about 2^-5 .. 2^3.
uint16_t grad_bits(Low low, int rank, size_t i) {
  const uint32_t h = uint32_t(i) * 2654435761u + uint32_t(rank) * 2246822519u + 12345u;
  const uint32_t sign = (h >> 31) & 1, exp_off = (h >> 20) % 8, mant = h & 0x3ff;
  if (low == Low::kBF16) return uint16_t(sign << 15 | (122 + exp_off) << 7 | (mant & 0x7f));
  return uint16_t(sign << 15 | (10 + exp_off) << 10 | mant);
}

double decode(Low low, uint16_t b) {
  const int sign = b >> 15;
  if (low == Low::kBF16) {
    const uint32_t bits = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const int e = (b >> 10) & 0x1f, m = b & 0x3ff;  // normal numbers only, by construction
  return (sign ? -1 : 1) * std::ldexp(1.0 + m / 1024.0, e - 15);
}

std::string yaml() {
  return "comm: {backend: gloo, timeout: 30s}\n"
         "hook: {family: mixed_precision, name: allreduce_upcast}\n";
}

// A 16-bit bucket over `bits` and fp32 gradient tensors the hook writes.
struct LowBucket {
  std::vector<uint16_t> bits;
  std::vector<std::vector<float>> grads;
  std::vector<ddph_param_t> views;
  int64_t n = kN;
  ddph_bucket_t b{};
  LowBucket(Low low, int rank) : bits(kN) {
    for (size_t i = 0; i < kN; ++i) bits[i] = grad_bits(low, rank, i);
    int64_t offset = 0;
    grads.reserve(kShapes.size());
    for (const auto& s : kShapes) {
      int64_t count = 1;
      for (int64_t d : s) count *= d;
      grads.emplace_back(size_t(count), -999.f);
      ddph_param_t v{};
      v.struct_size = sizeof v;
      v.offset = offset;
      v.ndim = int32_t(s.size());
      v.shape = s.data();
      v.data.data = grads.back().data();
      v.data.device = {kDLCPU, 0};
      v.data.ndim = v.ndim;
      v.data.dtype = {kDLFloat, 32, 1};
      v.data.shape = const_cast<int64_t*>(s.data());
      views.push_back(v);
      offset += count;
    }
    b.struct_size = sizeof b;
    b.is_last = 1;
    b.buffer.data = bits.data();
    b.buffer.device = {kDLCPU, 0};
    b.buffer.ndim = 1;
    b.buffer.dtype = low == Low::kBF16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 16, 1};
    b.buffer.shape = &n;
    b.num_params = views.size();
    b.params = views.data();
  }
  std::vector<float> flat_grads() const {
    std::vector<float> out;
    for (const auto& g : grads) out.insert(out.end(), g.begin(), g.end());
    return out;
  }
};

// PyTorch's result for 2 ranks: (a + b).div_(2) in the low dtype, upcast.
std::vector<float> torch_two_rank_mean(Low low) {
  std::vector<uint16_t> a(kN), b(kN);
  for (size_t i = 0; i < kN; ++i) a[i] = grad_bits(low, 0, i), b[i] = grad_bits(low, 1, i);
  const std::string dt = low == Low::kBF16 ? "torch.bfloat16" : "torch.float16";
  const std::string script =
      "import sys, numpy as np, torch\n"
      "d = sys.argv[1]\n"
      "def load(name):\n"
      "    return torch.from_numpy(np.fromfile(d + '/' + name, dtype=np.int16)).view(" +
      dt +
      ")\n"
      "m = (load('a') + load('b')).div_(2)\n"
      "m.float().numpy().tofile(d + '/mean')\n";
  auto out = ddph_test::run_torch(
      script, {{"a", ddph_test::to_blob(a)}, {"b", ddph_test::to_blob(b)}}, {"mean"});
  return ddph_test::from_blob<float>(out.at("mean"));
}

class Upcast : public ::testing::TestWithParam<std::tuple<Low, int>> {};

TEST_P(Upcast, Fp32GradientsEqualTheMeanOfTheUpcastGradients) {
  const Low low = std::get<0>(GetParam());
  const int world = std::get<1>(GetParam());
  std::vector<float> exact;
  if (world == 2 && ddph_test::torch_available()) exact = torch_two_rank_mean(low);
  auto results = ddph_test::run_ranks(world, [&](int rank, int w, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml(), rank, w, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    LowBucket bk(low, rank);
    std::string msg;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, bk.b, &msg) == DDPH_OK, "run: %s", msg.c_str());
    const std::vector<float> got = bk.flat_grads();
    const double unit = low == Low::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (size_t i = 0; i < kN; ++i) {
      double sum = 0, mag = 0;
      for (int r = 0; r < w; ++r) {
        const double g = decode(low, grad_bits(low, r, i));
        sum += g;
        mag += std::fabs(g);
      }
      // Each of the w - 1 adds and the divide rounds once in the low dtype.
      const double tol = unit * mag / w * w;
      DDPH_CHILD_CHECK(std::fabs(got[i] - sum / w) <= tol, "%s x%d [%zu]: %.9g, fp32 mean %.9g",
                       low_name(low), w, i, got[i], sum / w);
      if (!exact.empty())
        DDPH_CHILD_CHECK(got[i] == exact[i], "%s [%zu]: %.9g, torch %.9g", low_name(low), i, got[i],
                         exact[i]);
      // The bucket keeps the low-precision mean, which upcasts to the same value.
      DDPH_CHILD_CHECK(decode(low, bk.bits[i]) == double(got[i]), "bucket [%zu]", i);
    }
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, got.data(), kN * 4), "ranks differ");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo, Upcast,
                         ::testing::Combine(::testing::Values(Low::kBF16, Low::kF16),
                                            ::testing::Values(2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<Low, int>>& i) {
                           return std::string(low_name(std::get<0>(i.param))) + "_world" +
                                  std::to_string(std::get<1>(i.param));
                         });

// A float32 bucket: sum, divide, copy; on 2 ranks (a + b) / 2 in float.
TEST(Upcast, Float32BucketsAreSummedDividedAndCopied) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml(), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    auto value = [](int r, size_t i) { return float(std::sin(double(i) + r)) / 3.0f; };
    std::vector<float> buf(kN);
    for (size_t i = 0; i < kN; ++i) buf[i] = value(rank, i);
    std::vector<float> out(kN, -1.f);
    int64_t shape = kN;
    ddph_param_t v{};
    v.struct_size = sizeof v;
    v.ndim = 1;
    v.shape = &shape;
    v.data.data = out.data();
    v.data.device = {kDLCPU, 0};
    v.data.ndim = 1;
    v.data.dtype = {kDLFloat, 32, 1};
    v.data.shape = &shape;
    ddph_test::FloatBucket b(buf, 0, 0, true);
    b.bucket.num_params = 1;
    b.bucket.params = &v;
    std::string msg;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b.bucket, &msg) == DDPH_OK, "run: %s", msg.c_str());
    for (size_t i = 0; i < kN; ++i)
      DDPH_CHILD_CHECK(out[i] == (value(0, i) + value(1, i)) / 2, "[%zu] %.9g", i, out[i]);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Misuse: every case is refused on every rank before anything is sent.
TEST(Upcast, MissingOrWrongGradientViewsAreRefused) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml(), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::string msg;
    LowBucket none(Low::kBF16, rank);
    none.b.num_params = 0;
    none.b.params = nullptr;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, none.b, &msg) == DDPH_INVALID_ARGUMENT &&
                         msg.find("nowhere to go") != std::string::npos,
                     "no params: %s", msg.c_str());
    LowBucket unshared(Low::kBF16, rank);
    unshared.views[2].data.data = nullptr;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, unshared.b, &msg) == DDPH_INVALID_ARGUMENT &&
                         msg.find("params[2].data.data is NULL") != std::string::npos,
                     "unshared: %s", msg.c_str());
    DDPH_CHILD_CHECK(unshared.grads[0][0] == -999.f, "a refused bucket wrote a gradient");
    LowBucket wide(Low::kF16, rank);
    wide.views[1].data.dtype = {kDLFloat, 64, 1};
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, wide.b, &msg) == DDPH_UNSUPPORTED &&
                         msg.find("float32") != std::string::npos,
                     "float64 view: %s", msg.c_str());
    LowBucket small(Low::kF16, rank);
    int64_t short_shape[1] = {3};
    small.views[1].data.ndim = 1;
    small.views[1].data.shape = short_shape;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, small.b, &msg) == DDPH_INVALID_ARGUMENT &&
                         msg.find("3 elements") != std::string::npos,
                     "short view: %s", msg.c_str());
    LowBucket ints(Low::kBF16, rank);
    ints.b.buffer.dtype = {kDLInt, 32, 1};
    ints.n = kN / 2;
    ints.b.num_params = 0;  // the dtype is refused first
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, ints.b, &msg) == DDPH_UNSUPPORTED &&
                         msg.find("int32") != std::string::npos,
                     "int32 bucket: %s", msg.c_str());
    // The session still works.
    LowBucket fine(Low::kBF16, rank);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, fine.b, &msg) == DDPH_OK, "after misuse: %s",
                     msg.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

}  // namespace
