// Every SIMD level gives the same bits as the scalar reference, through the
// public entry points, with lengths that leave tails and unaligned pointers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "core/base/error.h"
#include "core/kernels/cast.h"
#include "core/kernels/divide.h"
#include "core/kernels/isa.h"
#include "core/kernels/reduce.h"
#include "core/kernels/scalar.h"
#include "tests/kernels/corner_cases.h"
#include "tests/support/isa_levels.h"

namespace {

using ddph::DType;
using ddph::Isa;

using ddph_test::IsaCap;
using ddph_test::simd_levels;

// Runs fn (which fills its output bytes) at the scalar level and at every
// SIMD level, and expects identical bytes.
void expect_same_at_every_level(const char* what, const std::function<std::vector<uint8_t>()>& fn) {
  std::vector<uint8_t> want;
  {
    IsaCap cap(Isa::kScalar);
    want = fn();
  }
  if (simd_levels().empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  for (Isa isa : simd_levels()) {
    IsaCap cap(isa);
    ASSERT_EQ(ddph::isa_active(), isa);
    std::vector<uint8_t> got = fn();
    ASSERT_EQ(got.size(), want.size());
    size_t first = 0;
    while (first < got.size() && got[first] == want[first]) ++first;
    EXPECT_EQ(first, got.size()) << what << ": " << ddph::isa_name(isa)
                                 << " differs from scalar at byte " << first;
  }
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// active_table: the active level's table, or the nearest level below it that
// the kit has one for (the quantization kit has none for avx512bf16).
struct FakeTable {
  int level;
};
const FakeTable& fake_avx2() {
  static const FakeTable t{1};
  return t;
}
const FakeTable& fake_avx512() {
  static const FakeTable t{2};
  return t;
}

TEST(KernelDispatch, ActiveTableFallsBackToTheNearestLevelBelow) {
  static const FakeTable scalar{0};
  static const FakeTable& (*const kLevels[])() = {&fake_avx2, &fake_avx512};
  for (Isa cap : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    IsaCap limit(cap);
    const int active = int(ddph::isa_active());
    const int want = active < 2 ? active : 2;
    EXPECT_EQ(ddph::active_table(scalar, kLevels).level, want) << ddph::isa_name(cap);
  }
}

TEST(KernelDispatch, ReportsLevels) {
  std::printf("CPU kernel level: %s (active %s)\n", ddph::isa_name(ddph::isa_supported()),
              ddph::isa_name(ddph::isa_active()));
  IsaCap cap(Isa::kScalar);
  EXPECT_EQ(ddph::isa_active(), Isa::kScalar);
}

TEST(KernelDispatch, UpCastsOfEvery16BitPattern) {
  // One element off alignment, and a length that leaves a tail at 8 and 16 lanes.
  std::vector<uint16_t> src = ddph_test::all_16bit_patterns();
  src.insert(src.begin(), uint16_t(0x3C00));
  src.push_back(0x7E01);
  const size_t n = src.size() - 1;
  for (DType low : {DType::F16, DType::BF16}) {
    expect_same_at_every_level(ddph::dtype_name(low), [&] {
      std::vector<float> out(n + 1);
      ddph::cast_into(low, src.data() + 1, DType::F32, out.data() + 1, n);
      return bytes_of(out);
    });
  }
}

TEST(KernelDispatch, DownCastsOfCornerCases) {
  std::vector<float> src = ddph_test::float_corner_cases(1 << 21, 3);
  src.push_back(1.0f);
  const size_t n = src.size() - 1;
  for (DType low : {DType::F16, DType::BF16}) {
    expect_same_at_every_level(ddph::dtype_name(low), [&] {
      std::vector<uint16_t> out(n + 1);
      ddph::cast_into(DType::F32, src.data() + 1, low, out.data() + 1, n);
      return bytes_of(out);
    });
    expect_same_at_every_level("cast_div", [&] {
      std::vector<uint16_t> out(2 * n);
      ddph::cast_div_into(DType::F32, src.data() + 1, low, out.data(), n, 3);
      ddph::cast_div_into(DType::F32, src.data(), low, out.data() + n, n, 2);
      return bytes_of(out);
    });
  }
}

TEST(KernelDispatch, DownCastsMatchScalarFormulas) {
  using namespace ddph::kernels;
  std::vector<float> src = ddph_test::float_corner_cases(1 << 16, 5);
  std::vector<uint16_t> h(src.size()), b(src.size()), hd(src.size()), bd(src.size());
  ddph::cast_into(DType::F32, src.data(), DType::F16, h.data(), src.size());
  ddph::cast_into(DType::F32, src.data(), DType::BF16, b.data(), src.size());
  ddph::cast_div_into(DType::F32, src.data(), DType::F16, hd.data(), src.size(), 3);
  ddph::cast_div_into(DType::F32, src.data(), DType::BF16, bd.data(), src.size(), 3);
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(h[i], f32_to_f16_bits(src[i])) << i;
    ASSERT_EQ(b[i], f32_to_bf16_bits(src[i])) << i;
    ASSERT_EQ(hd[i], f16_div(f32_to_f16_bits(src[i]), 3.0f)) << i;
    ASSERT_EQ(bd[i], bf16_div(f32_to_bf16_bits(src[i]), 3.0f)) << i;
  }
}

TEST(KernelDispatch, Float64GoesThroughFloat32) {
  std::vector<double> src = {1.0, 1.0 + 1e-12, 65519.99, 1e300, -1e-300, 3.14159265358979, NAN};
  for (int i = 0; i < 10000; ++i) src.push_back(std::sin(i) * 1000.0);
  std::vector<uint16_t> low(src.size());
  std::vector<double> back(src.size());
  for (DType t : {DType::F16, DType::BF16}) {
    ddph::cast_into(DType::F64, src.data(), t, low.data(), src.size());
    ddph::cast_into(t, low.data(), DType::F64, back.data(), src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      const float f = float(src[i]);
      const uint16_t want =
          t == DType::F16 ? ddph::kernels::f32_to_f16_bits(f) : ddph::kernels::f32_to_bf16_bits(f);
      ASSERT_EQ(low[i], want) << i;
      const float up = t == DType::F16 ? ddph::kernels::f16_bits_to_f32(want)
                                       : ddph::kernels::bf16_bits_to_f32(want);
      if (!std::isnan(up)) {
        ASSERT_EQ(back[i], double(up)) << i;
      }
    }
  }
}

TEST(KernelDispatch, DivideEveryDtype) {
  for (DType t :
       {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    const size_t n = t == DType::F16 || t == DType::BF16 ? 65536 + 37 : 100003;
    std::vector<uint8_t> src = ddph_test::random_bytes(n * ddph::dtype_size(t), 11);
    if (t == DType::F16 || t == DType::BF16) {
      std::vector<uint16_t> all = ddph_test::all_16bit_patterns();
      std::memcpy(src.data(), all.data(), all.size() * 2);
    }
    for (int64_t w : {1, 2, 3, 7}) {
      expect_same_at_every_level(ddph::dtype_name(t), [&] {
        std::vector<uint8_t> buf = src;
        ddph::divide_inplace(t, buf.data(), n, w);
        return buf;
      });
    }
  }
}

// Floats get the bits of true division at every level, for random bit
// patterns (NaNs, infinities and subnormals among them). Powers of two are
// divided by multiplying with the exact inverse: the same real number, so
// the same bits; other divisors must not take that path.
template <class T, class Bits>
void expect_true_division_bits(const std::vector<uint8_t>& src, int64_t w) {
  const size_t n = src.size() / sizeof(T);
  std::vector<T> want(n);
  std::memcpy(want.data(), src.data(), n * sizeof(T));
  for (T& x : want) x = x / T(w);
  std::vector<Isa> levels = simd_levels();
  levels.push_back(Isa::kScalar);
  for (Isa isa : levels) {
    IsaCap cap(isa);
    std::vector<T> got(n);
    std::memcpy(got.data(), src.data(), n * sizeof(T));
    ddph::divide_inplace(sizeof(T) == 4 ? DType::F32 : DType::F64, got.data(), n, w);
    for (size_t i = 0; i < n; ++i) {
      Bits g, e;
      std::memcpy(&g, &got[i], sizeof g);
      std::memcpy(&e, &want[i], sizeof e);
      ASSERT_EQ(g, e) << ddph::isa_name(isa) << " w " << w << " element " << i;
    }
  }
}

TEST(KernelDispatch, DivideIsTrueDivisionForEveryDivisor) {
  std::vector<uint8_t> src = ddph_test::random_bytes(8 * 50021, 12);
  // Subnormal results: small normals divided down across the boundary.
  const float small[] = {1.1754944e-38f, 3.0e-38f, -2.5e-38f, 1.0e-45f, 7.0e-39f};
  std::memcpy(src.data(), small, sizeof small);
  for (int64_t w : {int64_t(1), int64_t(2), int64_t(3), int64_t(4), int64_t(7), int64_t(8),
                    int64_t(1024), int64_t(1) << 40}) {
    expect_true_division_bits<float, uint32_t>(src, w);
    expect_true_division_bits<double, uint64_t>(src, w);
  }
}

TEST(KernelDispatch, DivideValues) {
  std::vector<float> f = {3.0f, -7.5f, 1e-45f, INFINITY};
  ddph::divide_inplace(DType::F32, f.data(), f.size(), 3);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -7.5f / 3.0f);
  EXPECT_EQ(f[3], INFINITY);
  std::vector<int32_t> i = {7, -7, 6, INT32_MIN};
  ddph::divide_inplace(DType::I32, i.data(), i.size(), 2);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 3, INT32_MIN / 2}));
  std::vector<uint8_t> u = {255, 3, 1};
  ddph::divide_inplace(DType::U8, u.data(), u.size(), 3);
  EXPECT_EQ(u, (std::vector<uint8_t>{85, 1, 0}));
  ddph::divide_inplace(DType::U8, u.data(), u.size(), 1000);
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_THROW(ddph::divide_inplace(DType::F32, f.data(), f.size(), 0), ddph::Error);
}

// When both operands are NaN, IEEE (and x86) leave open whose payload the sum
// carries, and the compiler may order the operands either way; reduce.h
// promises bit-identical results everywhere else. b's NaN becomes a zero.
void drop_double_nans(DType t, const std::vector<uint8_t>& a, std::vector<uint8_t>& b, size_t n) {
  const size_t es = ddph::dtype_size(t);
  for (size_t i = 0; i < n; ++i)
    if (ddph_test::is_nan(t, &a[i * es]) && ddph_test::is_nan(t, &b[i * es]))
      std::memset(&b[i * es], 0, es);
}

TEST(KernelDispatch, ReduceEveryOpAndDtype) {
  for (DType t :
       {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    const size_t es = ddph::dtype_size(t);
    const size_t n = t == DType::F16 || t == DType::BF16 ? 65536 * 3 + 5 : 200003;
    std::vector<uint8_t> a = ddph_test::random_bytes(n * es, 21);
    std::vector<uint8_t> b = ddph_test::random_bytes(n * es, 22);
    if (es == 2) {
      // Every pattern meets several partners, NaNs and infinities included.
      for (size_t i = 0; i < n; ++i) {
        const uint16_t p = uint16_t(i);
        std::memcpy(&a[i * 2], &p, 2);
      }
    } else if (t == DType::F32) {
      // Mostly ordinary numbers, so sums round; the random bits bring NaNs.
      std::vector<float> f = ddph_test::float_corner_cases(n / 2, 23);
      std::memcpy(a.data(), f.data(), std::min(f.size() * 4, a.size()));
    }
    drop_double_nans(t, a, b, n);
    for (ddph_reduce_op_t op : {DDPH_SUM, DDPH_MAX, DDPH_MIN, DDPH_AVG}) {
      expect_same_at_every_level(ddph::dtype_name(t), [&] {
        std::vector<uint8_t> out(n * es), in_place = a;
        ddph::reduce_into(op, t, out.data(), a.data(), b.data(), n);
        ddph::reduce_into(op, t, in_place.data(), in_place.data(), b.data(), n);
        EXPECT_EQ(out, in_place) << "in place differs";
        return out;
      });
    }
  }
}

TEST(KernelDispatch, ReduceValues) {
  using namespace ddph::kernels;
  std::vector<float> a = {1, NAN, 3, -0.0f}, b = {2, 5, NAN, 0.0f}, out(4);
  ddph::reduce_into(DDPH_MAX, DType::F32, out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out[0], 2);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_TRUE(std::isnan(out[2]));
  ddph::reduce_into(DDPH_SUM, DType::F32, out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out[0], 3);
  std::vector<uint8_t> u1 = {200, 1}, u2 = {100, 2}, u3(2);
  ddph::reduce_into(DDPH_SUM, DType::U8, u3.data(), u1.data(), u2.data(), 2);
  EXPECT_EQ(u3, (std::vector<uint8_t>{44, 3}));
  std::vector<uint16_t> h1(1000), h2(1000), h3(1000);
  for (int i = 0; i < 1000; ++i) {
    h1[i] = f32_to_f16_bits(0.001f * i);
    h2[i] = f32_to_f16_bits(1.0f + 0.01f * i);
  }
  ddph::reduce_into(DDPH_SUM, DType::F16, h3.data(), h1.data(), h2.data(), 1000);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(h3[i], f32_to_f16_bits(f16_bits_to_f32(h1[i]) + f16_bits_to_f32(h2[i])));
  EXPECT_THROW(
      ddph::reduce_into(ddph_reduce_op_t(42), DType::F32, out.data(), a.data(), b.data(), 4),
      ddph::Error);
}

}  // namespace
