// The default and debugging families on 2 and 3 in-process ranks: exact
// means, 16-bit compression equal bit for bit to PyTorch's formula (and to
// torch itself when /usr/bin/python3 has it), wrappers composing with
// allreduce, noop, and the byte counts in stats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/kernels/scalar.h"
#include "tests/hooks/hook_runner.h"
#include "tests/hooks/thread_comm.h"
#include "tests/support/torch_ref.h"

namespace {

using ddph::DType;
using namespace ddph_test;
namespace k = ddph::kernels;

struct HookName {
  const char* family;
  const char* name;
};

// Runs `hook` (wrapping `inner` when given) on inputs.size() ranks; rank r's
// bucket holds inputs[r]. Each rank runs `steps` steps over the same bucket
// index, reloading its input each step. Returns the buffers afterwards.
template <class T>
std::vector<std::vector<T>> run_hook(HookName hook, DType dtype, std::vector<std::vector<T>> in,
                                     HookName inner = {nullptr, nullptr}, int steps = 1,
                                     std::vector<ddph_stats_t>* stats = nullptr) {
  const int world = int(in.size());
  std::vector<std::vector<T>> out = in;
  if (stats) stats->assign(size_t(world), ddph_stats_t{});
  ThreadGroup group(world, ddph_host());
  group.run([&](int r) {
    try {
      std::unique_ptr<HookInstance> wrapped;
      ddph_hook_ref_t inner_ref{};
      if (inner.family != nullptr) {
        wrapped =
            std::make_unique<HookInstance>(find_hook(inner.family, inner.name), group.comm(r));
        inner_ref = wrapped->ref();
      }
      HookInstance h(find_hook(hook.family, hook.name), group.comm(r),
                     wrapped ? &inner_ref : nullptr);
      for (int s = 0; s < steps; ++s) {
        out[r] = in[r];
        BucketView b(out[r].data(), dl(dtype), int64_t(out[r].size()), 7, uint64_t(s));
        RunOutcome o = run_bucket(h.ref(), &b.bucket);
        EXPECT_EQ(o.returned.code, DDPH_OK) << o.returned.message;
        EXPECT_EQ(o.done_calls, 1);
        EXPECT_EQ(o.completed.code, DDPH_OK) << o.completed.message;
      }
      if (stats) {
        (*stats)[r].struct_size = sizeof(ddph_stats_t);
        EXPECT_EQ(take_error(h.ref().hook->stats(h.state(), &(*stats)[r])).code, DDPH_OK);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
    }
  });
  return out;
}

template <class T>
void expect_same_on_every_rank(const std::vector<std::vector<T>>& out) {
  for (size_t r = 1; r < out.size(); ++r)
    EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), out[0].size() * sizeof(T)), 0)
        << "rank " << r << " differs from rank 0";
}

// Rank r holds world * v_r: dividing by world is exact, and so is the sum.
template <class T, class Make>
void check_exact_mean(DType dtype, int world, Make make) {
  const size_t n = 1037;
  std::vector<std::vector<T>> in(world);
  std::vector<double> want(n, 0.0);
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < n; ++i) {
      const int v = int((i * 7 + size_t(r) * 3) % 19);
      in[r].push_back(make(double(world * v)));
      want[i] += v;
    }
  auto out = run_hook<T>({"default", "allreduce"}, dtype, in);
  expect_same_on_every_rank(out);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[0][i], make(want[i]))
        << ddph::dtype_name(dtype) << " world " << world << " element " << i;
  }
}

class Worlds : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(TwoAndThreeRanks, Worlds, ::testing::Values(2, 3));

TEST_P(Worlds, AllreduceGivesTheExactMeanForEveryDtype) {
  const int w = GetParam();
  check_exact_mean<float>(DType::F32, w, [](double v) { return float(v); });
  check_exact_mean<double>(DType::F64, w, [](double v) { return v; });
  check_exact_mean<int32_t>(DType::I32, w, [](double v) { return int32_t(v); });
  check_exact_mean<int64_t>(DType::I64, w, [](double v) { return int64_t(v); });
  check_exact_mean<uint8_t>(DType::U8, w, [](double v) { return uint8_t(v); });
  check_exact_mean<uint16_t>(DType::F16, w, [](double v) { return k::f32_to_f16_bits(float(v)); });
  check_exact_mean<uint16_t>(DType::BF16, w,
                             [](double v) { return k::f32_to_bf16_bits(float(v)); });
}

ddph_option_t divide_option(const char* value) {
  ddph_option_t o{};
  o.struct_size = sizeof o;
  o.name = "divide";
  o.type = DDPH_STRING;
  o.value.s = value;
  return o;
}

// Runs default/allreduce with option divide = `divide` on in.size() ranks.
std::vector<std::vector<float>> allreduce_dividing(const char* divide,
                                                   std::vector<std::vector<float>> in) {
  const int world = int(in.size());
  ThreadGroup group(world, ddph_host());
  group.run([&](int r) {
    try {
      HookInstance h(find_hook("default", "allreduce"), group.comm(r), nullptr,
                     {divide_option(divide)});
      BucketView b(in[r].data(), dl(DType::F32), int64_t(in[r].size()));
      RunOutcome o = run_bucket(h.ref(), &b.bucket);
      EXPECT_EQ(o.returned.code, DDPH_OK) << o.returned.message;
      EXPECT_EQ(o.completed.code, DDPH_OK) << o.completed.message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
    }
  });
  return in;
}

// Integers sum exactly in any order, so `after` must round once: fl(S / w).
// `before` rounds each v / w first; at world 3 that differs somewhere.
TEST_P(Worlds, AllreduceDivideAfterRoundsTheExactSumOnce) {
  const int w = GetParam();
  const size_t n = 4099;
  std::vector<std::vector<float>> in(w);
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < w; ++r)
    for (size_t i = 0; i < n; ++i) {
      in[r].push_back(float((i * 131 + size_t(r) * 977) % 100003));
      sum[i] += in[r][i];  // exact: integers below 2^24
    }
  const auto after = allreduce_dividing("after", in);
  const auto before = allreduce_dividing("before", in);
  expect_same_on_every_rank(after);
  size_t differs = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(after[0][i], sum[i] / float(w)) << "world " << w << " element " << i;
    differs += before[0][i] != after[0][i];
  }
  // Halving is exact, so at world 2 the orders agree; a third is not.
  if (w == 2) {
    EXPECT_EQ(differs, 0u);
  } else {
    EXPECT_GT(differs, 0u);
  }
}

TEST(DefaultHooks, AllreduceRefusesAnUnknownDivide) {
  ThreadGroup group(1, ddph_host());
  try {
    HookInstance h(find_hook("default", "allreduce"), group.comm(0), nullptr,
                   {divide_option("sideways")});
    ADD_FAILURE() << "create accepted divide: sideways";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("option divide is 'sideways'"), std::string::npos)
        << e.what();
  }
}

std::vector<std::vector<float>> gradients(int world, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-24, 8);
  std::vector<std::vector<float>> x(world, std::vector<float>(n));
  for (auto& v : x)
    for (auto& f : v) f = std::ldexp(normal(rng), scale(rng));
  x[0][0] = 60000.0f;  // dividing before the float16 sum keeps 60000 + 60000 finite
  if (world > 1) x[1][0] = 60000.0f;
  return x;
}

// PyTorch's fp16_compress_hook with a SUM in rank order, in scalar math:
// cast, divide in 16 bits, add in float rounding each time, cast back.
std::vector<float> reference_compress(const std::vector<std::vector<float>>& x, DType low) {
  auto down = [&](float f) {
    return low == DType::F16 ? k::f32_to_f16_bits(f) : k::f32_to_bf16_bits(f);
  };
  auto up = [&](uint16_t h) {
    return low == DType::F16 ? k::f16_bits_to_f32(h) : k::bf16_bits_to_f32(h);
  };
  const float w = float(x.size());
  std::vector<float> out(x[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t acc = 0;
    for (size_t r = 0; r < x.size(); ++r) {
      const uint16_t part = down(up(down(x[r][i])) / w);
      acc = r == 0 ? part : down(up(acc) + up(part));
    }
    out[i] = up(acc);
  }
  return out;
}

const char* kTorchCompress = R"PY(
import sys, numpy as np, torch
d = sys.argv[1]
world = int(np.fromfile(d + '/world', dtype=np.int32)[0])
x = np.fromfile(d + '/x', dtype=np.float32).reshape(world, -1)
for name, low in (('f16', torch.float16), ('bf16', torch.bfloat16)):
    # default_hooks.fp16_compress_hook, with the allreduce done as sums in rank order
    parts = [torch.from_numpy(x[r].copy()).to(low).div_(world) for r in range(world)]
    acc = parts[0].clone()
    for p in parts[1:]:
        acc = acc + p
    acc.to(torch.float32).numpy().tofile(d + '/' + name)
)PY";

void expect_bits_equal(const std::vector<float>& got, const std::vector<float>& want,
                       const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(k::float_bits(got[i]), k::float_bits(want[i]))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

TEST_P(Worlds, CompressMatchesPyTorchFormulaAndTolerance) {
  const int w = GetParam();
  const size_t n = 50021;
  auto x = gradients(w, n, 100 + uint32_t(w));
  std::vector<double> mean(n, 0.0);
  for (auto& v : x)
    for (size_t i = 0; i < n; ++i) mean[i] += double(v[i]) / w;

  for (DType low : {DType::F16, DType::BF16}) {
    const char* name = low == DType::F16 ? "fp16_compress" : "bf16_compress";
    auto out = run_hook<float>({"default", name}, DType::F32, x);
    expect_same_on_every_rank(out);
    expect_bits_equal(out[0], reference_compress(x, low), name);
    // Within the 16-bit format's tolerance of the fp32 mean: each of the
    // ~w+2 roundings costs at most one unit roundoff of the values involved.
    const double u = low == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double tiny = low == DType::F16 ? 6e-8 * (w + 2) : 0.0;
    for (size_t i = 0; i < n; ++i) {
      double mag = 0;
      for (auto& v : x) mag += std::fabs(double(v[i])) / w;
      ASSERT_LE(std::fabs(out[0][i] - mean[i]), (w + 2) * u * mag + tiny)
          << name << " element " << i;
    }
    EXPECT_TRUE(std::isfinite(out[0][0])) << name << " overflowed: divide before the sum";
  }
}

TEST_P(Worlds, CompressMatchesTorchItself) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 with torch not found";
  const int w = GetParam();
  const size_t n = 20011;
  auto x = gradients(w, n, 200 + uint32_t(w));
  std::vector<float> flat;
  for (auto& v : x) flat.insert(flat.end(), v.begin(), v.end());
  Blobs t =
      run_torch(kTorchCompress, {{"x", to_blob(flat)}, {"world", to_blob(std::vector<int32_t>{w})}},
                {"f16", "bf16"});
  expect_bits_equal(run_hook<float>({"default", "fp16_compress"}, DType::F32, x)[0],
                    from_blob<float>(t["f16"]), "fp16_compress vs torch");
  expect_bits_equal(run_hook<float>({"default", "bf16_compress"}, DType::F32, x)[0],
                    from_blob<float>(t["bf16"]), "bf16_compress vs torch");
}

TEST_P(Worlds, CompressOfFloat64GoesThroughFloat32) {
  const int w = GetParam();
  auto x = gradients(w, 3001, 300);
  std::vector<std::vector<double>> xd;
  for (auto& v : x) xd.emplace_back(v.begin(), v.end());
  for (DType low : {DType::F16, DType::BF16}) {
    const char* name = low == DType::F16 ? "fp16_compress" : "bf16_compress";
    auto out = run_hook<double>({"default", name}, DType::F64, xd);
    std::vector<float> want = reference_compress(x, low);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(out[0][i], double(want[i])) << i;
  }
}

TEST_P(Worlds, CompressOfA16BitBucketIsAllreduce) {
  const int w = GetParam();
  auto x = gradients(w, 999, 400);
  std::vector<std::vector<uint16_t>> h(w);
  for (int r = 0; r < w; ++r)
    for (float f : x[r]) h[r].push_back(k::f32_to_f16_bits(f));
  auto compressed = run_hook<uint16_t>({"default", "fp16_compress"}, DType::F16, h);
  auto reduced = run_hook<uint16_t>({"default", "allreduce"}, DType::F16, h);
  EXPECT_EQ(compressed, reduced);
}

TEST_P(Worlds, WrappersComposeWithAllreduce) {
  const int w = GetParam();
  auto x = gradients(w, 40009, 500);
  for (const char* bits : {"fp16", "bf16"}) {
    const std::string wrapper = std::string(bits) + "_wrapper";
    const std::string compress = std::string(bits) + "_compress";
    auto wrapped = run_hook<float>({"default", wrapper.c_str()}, DType::F32, x,
                                   {"default", "allreduce"}, /*steps=*/3);
    auto direct = run_hook<float>({"default", compress.c_str()}, DType::F32, x);
    expect_same_on_every_rank(wrapped);
    // Cast, divide, sum, cast back either way: the same bits, so within
    // compress's tolerance too.
    expect_bits_equal(wrapped[0], direct[0], wrapper.c_str());
  }
}

TEST(DefaultHooks, WrapperAroundNoopRoundTripsThe16BitCast) {
  auto x = gradients(2, 5000, 600);
  auto out = run_hook<float>({"default", "bf16_wrapper"}, DType::F32, x, {"debugging", "noop"});
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < x[r].size(); ++i)
      ASSERT_EQ(out[r][i], k::bf16_bits_to_f32(k::f32_to_bf16_bits(x[r][i])));
}

TEST(DebuggingHooks, NoopLeavesTheBufferUnchanged) {
  std::vector<std::vector<uint8_t>> in(3);
  std::mt19937 rng(7);
  for (auto& v : in)
    for (int i = 0; i < 4096; ++i) v.push_back(uint8_t(rng()));  // NaN patterns included
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::U8}) {
    const size_t es = ddph::dtype_size(t);
    std::vector<std::vector<uint8_t>> sized = in;
    for (auto& v : sized) v.resize(v.size() / es * es);
    // run_hook counts elements by T: pass bytes through the matching element type
    if (es == 1) {
      EXPECT_EQ(run_hook<uint8_t>({"debugging", "noop"}, t, sized), sized);
    } else {
      std::vector<std::vector<uint16_t>> as16(3);
      for (int r = 0; r < 3; ++r) {
        as16[r].resize(sized[r].size() / 2);
        std::memcpy(as16[r].data(), sized[r].data(), sized[r].size());
      }
      if (es == 2) {
        EXPECT_EQ(run_hook<uint16_t>({"debugging", "noop"}, t, as16), as16);
      } else {
        std::vector<std::vector<float>> as32(3);
        for (int r = 0; r < 3; ++r) {
          as32[r].resize(sized[r].size() / 4);
          std::memcpy(as32[r].data(), sized[r].data(), sized[r].size());
        }
        auto out = run_hook<float>({"debugging", "noop"}, t, as32);
        for (int r = 0; r < 3; ++r)
          EXPECT_EQ(std::memcmp(out[r].data(), as32[r].data(), as32[r].size() * 4), 0);
      }
    }
  }
}

TEST(DefaultHooks, StatsCountBytesInAndOut) {
  auto x = gradients(2, 1000, 700);
  std::vector<ddph_stats_t> st;
  run_hook<float>({"default", "fp16_compress"}, DType::F32, x, {nullptr, nullptr}, 2, &st);
  EXPECT_EQ(st[0].bytes_in, 2u * 1000 * 4);
  EXPECT_EQ(st[0].bytes_out, 2u * 1000 * 2);
  run_hook<float>({"default", "allreduce"}, DType::F32, x, {nullptr, nullptr}, 1, &st);
  EXPECT_EQ(st[1].bytes_in, 4000u);
  EXPECT_EQ(st[1].bytes_out, 4000u);
  run_hook<float>({"default", "bf16_wrapper"}, DType::F32, x, {"default", "allreduce"}, 1, &st);
  EXPECT_EQ(st[0].bytes_in, 4000u);
  EXPECT_EQ(st[0].bytes_out, 2000u);  // what the inner allreduce sent
  run_hook<float>({"debugging", "noop"}, DType::F32, x, {nullptr, nullptr}, 1, &st);
  EXPECT_EQ(st[0].bytes_in, 4000u);
  EXPECT_EQ(st[0].bytes_out, 0u);
}

}  // namespace
