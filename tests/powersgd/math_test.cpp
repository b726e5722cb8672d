// The powersgd math on its own: orthogonalization (orthonormal columns that
// span what the input's leading columns span, zero matrices, rank above
// min(n, m)), the three products against double loops, PyTorch's random Q
// against numpy and torch themselves, the bucket plan against
// _should_compress's inequality, and the checkpoint codec.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/base/error.h"
#include "plugins/powersgd/bucket_plan.h"
#include "plugins/powersgd/lowrank.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/orthogonalize.h"
#include "plugins/powersgd/state.h"
#include "plugins/powersgd/torch_rng.h"
#include "tests/powersgd/huge_operands.h"
#include "tests/support/torch_ref.h"

namespace {

namespace p = ddph::powersgd;

std::vector<float> random_matrix(int rows, int cols, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n;
  std::vector<float> a(size_t(rows) * size_t(cols));
  for (float& v : a) v = n(g);
  return a;
}

double dot_cols(const std::vector<float>& a, const std::vector<float>& b, int rows, int cols, int i,
                int j) {
  double s = 0;
  for (int r = 0; r < rows; ++r) s += double(a[size_t(r) * cols + i]) * b[size_t(r) * cols + j];
  return s;
}

// Columns orthonormal, and column k of the input lies in the span of the
// first k + 1 output columns (what QR and Gram-Schmidt both guarantee).
void expect_orthonormal_basis(const std::vector<float>& in, const std::vector<float>& out, int rows,
                              int cols) {
  for (int i = 0; i < cols; ++i)
    for (int j = 0; j < cols; ++j)
      EXPECT_NEAR(dot_cols(out, out, rows, cols, i, j), i == j ? 1.0 : 0.0, 2e-5)
          << "columns " << i << ", " << j;
  for (int k = 0; k < cols; ++k) {
    double norm2 = dot_cols(in, in, rows, cols, k, k), in_span = 0;
    for (int j = 0; j <= k; ++j) in_span += std::pow(dot_cols(in, out, rows, cols, k, j), 2);
    EXPECT_NEAR(in_span / norm2, 1.0, 1e-5) << "column " << k << " left the span";
  }
}

TEST(Orthogonalize, GramSchmidtAndQrGiveOrthonormalColumnsSpanningTheInput) {
  for (int cols : {1, 2, 3, 4, 8}) {
    const std::vector<float> a = random_matrix(50, cols, uint32_t(cols));
    std::vector<float> gs = a, qr = a, chosen = a;
    p::orthogonalize_gram_schmidt(gs.data(), 50, cols, 0);
    p::orthogonalize_qr(qr.data(), 50, cols);
    p::orthogonalize(chosen.data(), 50, cols, 0);
    expect_orthonormal_basis(a, gs, 50, cols);
    expect_orthonormal_basis(a, qr, 50, cols);
    // The dispatcher: Gram-Schmidt up to rank 2, QR above (PyTorch's rule).
    EXPECT_EQ(chosen, cols <= 2 ? gs : qr) << cols << " columns";
  }
}

TEST(Orthogonalize, ZeroMatrixGivesNoNaN) {
  for (int cols : {1, 2, 4}) {
    std::vector<float> z(size_t(30) * cols, 0.0f), gs = z, qr = z;
    p::orthogonalize_gram_schmidt(gs.data(), 30, cols, 0);
    p::orthogonalize_qr(qr.data(), 30, cols);
    for (float v : gs) EXPECT_EQ(v, 0.0f) << "Gram-Schmidt of zero must stay zero";
    for (float v : qr) EXPECT_TRUE(std::isfinite(v));
    // QR of zero still returns orthonormal columns (LAPACK's Householder
    // reflectors become identities), which is harmless: Q = M^T P is zero.
    for (int i = 0; i < cols; ++i) EXPECT_NEAR(dot_cols(qr, qr, 30, cols, i, i), 1.0, 1e-6);
  }
  // A zero column among non-zero ones, and epsilon > 0 (divides by norm + eps).
  std::vector<float> a = random_matrix(20, 2, 7);
  for (int r = 0; r < 20; ++r) a[size_t(r) * 2] = 0.0f;
  std::vector<float> b = a;
  p::orthogonalize_gram_schmidt(a.data(), 20, 2, 0);
  for (int r = 0; r < 20; ++r) EXPECT_EQ(a[size_t(r) * 2], 0.0f);
  EXPECT_NEAR(dot_cols(a, a, 20, 2, 1, 1), 1.0, 1e-6);
  const double norm = std::sqrt(dot_cols(b, b, 20, 2, 1, 1));
  p::orthogonalize_gram_schmidt(b.data(), 20, 2, 0.5f);
  EXPECT_NEAR(std::sqrt(dot_cols(b, b, 20, 2, 1, 1)), norm / (norm + 0.5), 1e-6);
}

// A NaN or Inf in a column made its norm NaN/Inf; `norm > 0` was false for
// NaN, so Gram-Schmidt zeroed the column and PowerSGD returned a finite zero
// matrix for a NaN gradient. Both paths must leave that column non-finite.
TEST(Orthogonalize, NonFiniteColumnStaysNonFinite) {
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    for (int cols : {1, 2, 4}) {
      std::vector<float> a = random_matrix(20, cols, 11);
      a[size_t(5) * cols] = bad;
      p::orthogonalize(a.data(), 20, cols, 0);
      int nonfinite = 0;
      for (int r = 0; r < 20; ++r) nonfinite += !std::isfinite(a[size_t(r) * cols]);
      EXPECT_GT(nonfinite, 0) << "column 0 holding " << bad << " came back finite, cols " << cols;
    }
  }
}

// Up to kFactorLimit (2^100) both methods still give orthonormal columns
// (the limit below which the hooks compress, docs/powersgd.md "Huge
// values"); far beyond it QR gives NaN, not an internal error, as for Inf.
TEST(Orthogonalize, HugeValuesUpToTheLimitAndBeyond) {
  for (int cols : {1, 2, 4}) {
    std::vector<float> a = random_matrix(20, cols, 12);
    float top = 0;
    for (float v : a) top = std::max(top, std::fabs(v));
    for (float& v : a) v = v / top * 0x1p100f;  // the largest exactly at the limit
    std::vector<float> o = a;
    p::orthogonalize(o.data(), 20, cols, 0);
    for (int i = 0; i < cols; ++i)
      for (int j = 0; j < cols; ++j)
        EXPECT_NEAR(dot_cols(o, o, 20, cols, i, j), i == j ? 1.0 : 0.0, 2e-6)
            << "cols " << cols << ": columns " << i << ", " << j;
  }
  std::vector<float> a = random_matrix(20, 4, 13);
  for (float& v : a) v *= 1e38f;
  EXPECT_NO_THROW(p::orthogonalize_qr(a.data(), 20, 4));
  for (float v : a) EXPECT_TRUE(std::isnan(v)) << v;
}

// The host's element-wise ops of a step (math_ops.h) against long double:
// a sum or product of finite floats past FLT_MAX saturates at +-FLT_MAX,
// every other result is IEEE's; an overflowed M counts as +-FLT_MAX where
// the data is finite; an uncompressed mean that is not finite leaves NaN
// in the error; factors past the limit become NaN, and the flag sees them.
TEST(HugeValues, TheHostOpsSaturateRatherThanOverflow) {
  std::vector<float> a, b;
  ddph_test::psgd::huge_operand_pairs(a, b);
  const size_t n = a.size();
  auto expect_same = [](float got, long double want, bool finite_operands, const char* what,
                        float x, float y) {
    if (finite_operands && std::fabs(want) > FLT_MAX)
      want = std::copysign((long double)FLT_MAX, want);
    const float w = float(want);
    EXPECT_TRUE(std::isnan(got) ? std::isnan(w) : got == w)
        << what << "(" << x << ", " << y << "): " << got << ", want " << w;
  };
  p::LowRankOps& ops = p::cpu_ops();
  std::vector<float> sum = a, diff = a, scaled(n), m = a, err = a;
  ops.add(sum.data(), b.data(), n);
  ops.subtract(diff.data(), b.data(), n);
  ops.scaled_copy(scaled.data(), a.data(), n, 4.0f);
  ops.saturate_overflow(m.data(), b.data(), n);
  ops.fallback_error(err.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const float x = a[i], y = b[i];
    const bool finite = std::isfinite(x) && std::isfinite(y);
    expect_same(sum[i], (long double)x + y, finite, "add", x, y);
    expect_same(diff[i], (long double)x - y, finite, "subtract", x, y);
    expect_same(scaled[i], (long double)x * 4, std::isfinite(x), "scaled_copy", x, 4);
    // M = x with data y: +-Inf where y is finite was an overflow.
    expect_same(m[i],
                std::isinf(x) && std::isfinite(y) ? std::copysign((long double)FLT_MAX, x) : x,
                false, "saturate_overflow", x, y);
    // The error of M = x around a mean y.
    expect_same(err[i], std::isfinite(y) ? (long double)x - y : NAN, finite, "fallback_error", x,
                y);
  }
  std::vector<float> f = {1.0f, -0x1p100f, 0x1p100f, 0.0f};
  float flag = 0;
  ops.flag_unusable(f.data(), f.size(), 0x1p100f, &flag);
  EXPECT_FALSE(ops.flag_set(&flag));
  for (float bad : {std::nextafter(0x1p100f, INFINITY), -INFINITY, std::nanf("")}) {
    std::vector<float> g = f;
    g[1] = bad;
    ops.flag_unusable(g.data(), g.size(), 0x1p100f, &flag);
    EXPECT_TRUE(ops.flag_set(&flag)) << bad;
    flag = 0;
    ops.poison_unusable(g.data(), g.size(), 0x1p100f);
    EXPECT_TRUE(std::isnan(g[1]) && g[0] == 1.0f && g[2] == 0x1p100f && g[3] == 0.0f) << bad;
  }
}

TEST(Orthogonalize, RankAboveMinOfRowsAndColumns) {
  // 3 rows cannot hold 5 orthonormal columns: the first 3 are a basis of
  // R^3, the other two are zero, for both methods.
  for (bool qr : {false, true}) {
    const std::vector<float> a = random_matrix(3, 5, 11);
    std::vector<float> o = a;
    if (qr)
      p::orthogonalize_qr(o.data(), 3, 5);
    else
      p::orthogonalize_gram_schmidt(o.data(), 3, 5, 0);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j)
        EXPECT_NEAR(dot_cols(o, o, 3, 5, i, j), (i == j && i < 3) ? 1.0 : 0.0, 2e-6)
            << (qr ? "QR" : "Gram-Schmidt") << " columns " << i << ", " << j;
  }
}

// Element (i, j) of P Q^T as every rank must round it: the products in
// order of k, each rounded, no fused multiply-add (this file is built with
// -ffp-contract=off).
float scalar_lowrank(const std::vector<float>& p, const std::vector<float>& q, int r, int i,
                     int j) {
  float v = p[size_t(i) * r] * q[size_t(j) * r];
  for (int k = 1; k < r; ++k) v += p[size_t(i) * r + k] * q[size_t(j) * r + k];
  return v;
}

void products_match_double_loops(int n, int m, int r);

TEST(LowRank, ProductsMatchDoubleLoops) {
  // r <= 4 takes the fused kernels, r = 6 cblas_sgemm; 53 columns leave a
  // tail after the 16-lane blocks.
  for (int r : {1, 3, 4, 6}) products_match_double_loops(37, 53, r);
}

void products_match_double_loops(int n, int m, int r) {
  SCOPED_TRACE("r = " + std::to_string(r));
  const std::vector<float> mat = random_matrix(n, m, 1), q = random_matrix(m, r, 2),
                           pin = random_matrix(n, r, 3), half = random_matrix(n, m, 4);
  std::vector<float> p(size_t(n) * r), qt(size_t(m) * r), out(size_t(n) * m);
  p::multiply_mq(mat.data(), nullptr, n, m, q.data(), r, p.data());
  // With error feedback: M = data + err is formed into err on the way.
  std::vector<float> data(mat.size()), err = half, p2(p.size());
  for (size_t i = 0; i < mat.size(); ++i) data[i] = mat[i] - half[i];
  p::multiply_mq(data.data(), err.data(), n, m, q.data(), r, p2.data());
  for (size_t i = 0; i < mat.size(); ++i) EXPECT_NEAR(err[i], mat[i], 1e-6);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p2[i], p[i], 1e-4);
  p::multiply_mtp(mat.data(), n, m, pin.data(), r, qt.data());
  std::vector<float> before = mat;
  p::reconstruct(pin.data(), q.data(), n, m, r, out.data(), before.data());
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < r; ++k) {
      double s = 0;
      for (int j = 0; j < m; ++j) s += double(mat[size_t(i) * m + j]) * q[size_t(j) * r + k];
      EXPECT_NEAR(p[size_t(i) * r + k], s, 1e-4);
    }
  for (int j = 0; j < m; ++j)
    for (int k = 0; k < r; ++k) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += double(mat[size_t(i) * m + j]) * pin[size_t(i) * r + k];
      EXPECT_NEAR(qt[size_t(j) * r + k], s, 1e-4);
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0;
      for (int k = 0; k < r; ++k) s += double(pin[size_t(i) * r + k]) * q[size_t(j) * r + k];
      EXPECT_NEAR(out[size_t(i) * m + j], s, 1e-5);
      EXPECT_NEAR(before[size_t(i) * m + j], mat[size_t(i) * m + j] - s, 1e-5);
      // Every rank must get the same bits on any CPU, so the vectorized
      // clones must round exactly as the scalar loop does.
      const float v = scalar_lowrank(pin, q, r, i, j);
      EXPECT_EQ(out[size_t(i) * m + j], v) << "row " << i << ", column " << j;
      EXPECT_EQ(before[size_t(i) * m + j], mat[size_t(i) * m + j] - v);
    }

  // The deferred error: reconstruct without `out` subtracts the same bits,
  // and P = M Q over a deferred error (last M, last P and Q) forms the same M
  // and P as settling the error first.
  std::vector<float> settled = mat;
  p::reconstruct(pin.data(), q.data(), n, m, r, nullptr, settled.data());
  EXPECT_EQ(std::memcmp(settled.data(), before.data(), before.size() * 4), 0);
  const std::vector<float> grad = random_matrix(n, m, 5), q_next = random_matrix(m, r, 6);
  std::vector<float> eager_m = settled, eager_p(p.size()), lazy_m = mat, lazy_p(p.size());
  p::multiply_mq(grad.data(), eager_m.data(), n, m, q_next.data(), r, eager_p.data());
  p::multiply_mq(grad.data(), lazy_m.data(), n, m, q_next.data(), r, lazy_p.data(),
                 p::Pending{pin.data(), q.data()});
  EXPECT_EQ(std::memcmp(lazy_m.data(), eager_m.data(), eager_m.size() * 4), 0);
  EXPECT_EQ(std::memcmp(lazy_p.data(), eager_p.data(), eager_p.size() * 4), 0);
}

// A matrix of 1 MiB or more is reconstructed with non-temporal stores where
// the CPU has AVX-512, when there is no error to update: the bits must be
// those of the cached path and of a scalar loop. Rows of 517 columns leave a
// different unaligned head and tail on every row.
TEST(LowRank, StreamedReconstructionKeepsTheBits) {
  const int n = 600, m = 517;
  for (int r : {1, 2, 3, 4}) {
    SCOPED_TRACE("r = " + std::to_string(r));
    const std::vector<float> pin = random_matrix(n, r, 7), q = random_matrix(m, r, 8);
    std::vector<float> streamed(size_t(n) * m, -1.0f), cached(streamed.size(), -2.0f),
        before(streamed.size(), 0.0f);
    p::reconstruct(pin.data(), q.data(), n, m, r, streamed.data(), nullptr);
    p::reconstruct(pin.data(), q.data(), n, m, r, cached.data(), before.data());
    EXPECT_EQ(std::memcmp(streamed.data(), cached.data(), cached.size() * 4), 0);
    size_t wrong = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) {
        wrong += streamed[size_t(i) * m + j] != scalar_lowrank(pin, q, r, i, j);
      }
    EXPECT_EQ(wrong, 0u);
  }
}

// numpy's RandomState(seed).randint(1_000_000_000) and torch.manual_seed(s);
// torch.randn(k) for several k in a row (both torch paths: k < 16 serial
// doubles with a cached second value, k >= 16 normal_fill with a redrawn tail).
TEST(TorchRng, MatchesNumpyAndTorch) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "no torch in /usr/bin/python3";
  const std::vector<int64_t> sizes = {5, 3, 16, 37, 128, 1};
  const char* script = R"PY(
import sys, numpy as np, torch
d = sys.argv[1]
sizes = [int(v) for v in np.fromfile(d + "/sizes", dtype=np.int64)]
seeds = []
for seed in (0, 1, 12345):
    rng = np.random.RandomState(seed)
    seeds += [rng.randint(1_000_000_000) for _ in range(700)]
np.array(seeds, dtype=np.int64).tofile(d + "/seeds")
out = []
for s in (0, 7, 424242):
    torch.manual_seed(s)
    out += [torch.randn(k) for k in sizes]
torch.cat(out).numpy().tofile(d + "/randn")
)PY";
  ddph_test::Blobs got =
      ddph_test::run_torch(script, {{"sizes", ddph_test::to_blob(sizes)}}, {"seeds", "randn"});
  const std::vector<int64_t> seeds = ddph_test::from_blob<int64_t>(got["seeds"]);
  const std::vector<float> randn = ddph_test::from_blob<float>(got["randn"]);
  size_t at = 0;
  for (uint32_t seed : {0u, 1u, 12345u}) {
    p::Mt19937 rng(seed);
    for (int i = 0; i < 700; ++i, ++at)
      ASSERT_EQ(int64_t(p::numpy_randint_1e9(rng)), seeds[at]) << "seed " << seed << " draw " << i;
  }
  at = 0;
  for (uint64_t s : {0ull, 7ull, 424242ull}) {
    p::TorchGenerator g(s);
    for (int64_t k : sizes) {
      std::vector<float> mine(static_cast<size_t>(k));
      g.randn(mine.data(), mine.size());
      for (int64_t i = 0; i < k; ++i, ++at)
        // torch vectorizes log/sin/cos (avx_mathfun); the uniforms are exact.
        EXPECT_NEAR(mine[size_t(i)], randn[at], 2e-6 * (1 + std::fabs(randn[at])))
            << "seed " << s << " size " << k << " element " << i;
    }
  }
}

ddph_bucket_t bucket_of(int64_t* numel, const std::vector<ddph_param_t>& params) {
  ddph_bucket_t b{};
  b.struct_size = sizeof b;
  b.buffer.ndim = 1;
  b.buffer.shape = numel;
  b.num_params = params.size();
  b.params = params.data();
  return b;
}

ddph_param_t param(int64_t offset, const std::vector<int64_t>& shape) {
  ddph_param_t p{};
  p.struct_size = sizeof p;
  p.offset = offset;
  p.ndim = int32_t(shape.size());
  p.shape = shape.data();
  return p;
}

TEST(BucketPlan, CompressesWhatShouldCompressAcceptsAndGroupsShapes) {
  // 10x10 r=2: (10+10)*2*2 = 80 < 100, compressed; 4x5: 36 >= 20, not;
  // bias (8,) -> 8 x 1, never; conv (6, 2, 3, 3) -> 6 x 18: 96 < 108, compressed.
  const std::vector<int64_t> a = {10, 10}, b = {4, 5}, c = {8}, d = {6, 2, 3, 3}, e = {10, 10};
  const std::vector<ddph_param_t> ps = {param(0, a), param(100, b), param(120, c), param(128, d),
                                        param(236, e)};
  int64_t numel = 336 + 4;  // 4 trailing elements no parameter covers
  const p::BucketPlan plan = p::plan_bucket(bucket_of(&numel, ps), 2, 2.0, "powersgd");
  ASSERT_EQ(plan.matrices.size(), 3u);
  // Groups by shape in order of first appearance: (10,10) x2, then (6,18).
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].members.size(), 2u);
  EXPECT_EQ(plan.matrices[0].offset, 0);
  EXPECT_EQ(plan.matrices[1].offset, 236);
  EXPECT_EQ(plan.matrices[2].offset, 128);
  EXPECT_EQ(plan.matrices[2].rows, 6);
  EXPECT_EQ(plan.matrices[2].cols, 18);
  EXPECT_EQ(plan.p_numel, (10 + 10 + 6) * 2);
  EXPECT_EQ(plan.q_numel, (10 + 10 + 18) * 2);
  EXPECT_EQ(plan.matrices[1].q_offset, 20);
  EXPECT_EQ(plan.uncompressed_numel, 20 + 8 + 4);
  EXPECT_EQ(plan.numel_before, 336);
  EXPECT_EQ(plan.numel_after, 40 + 40 + 48 + 20 + 8);
  // A rate of 0.1 compresses the 4x5 too, at r = min(4, 5, rank 8) = 4.
  const p::BucketPlan lax = p::plan_bucket(bucket_of(&numel, ps), 8, 0.1, "powersgd");
  bool found = false;
  for (const auto& m : lax.matrices) found |= m.rows == 4 && m.cols == 5 && m.r == 4;
  EXPECT_TRUE(found);
  // Overlapping views are refused.
  const std::vector<ddph_param_t> bad = {param(0, a), param(50, a)};
  int64_t n2 = 200;
  EXPECT_THROW(p::plan_bucket(bucket_of(&n2, bad), 1, 2.0, "powersgd"), ddph::Error);
}

TEST(State, RoundTripAndRejectsForeignOrCorruptBlobs) {
  p::PsgdState s;
  s.iter = 42;
  s.rng.seed_with(9);
  p::numpy_randint_1e9(s.rng);
  s.buckets[3].has_pq = true;
  s.buckets[3].p = {1.0f, -2.5f};
  s.buckets[3].q = {0.25f};
  s.buckets[7].error = {7.0f, 8.0f, 9.0f};
  const std::string blob = p::encode_state(s, p::HookKind::kLayerwise);
  const p::PsgdState back = p::decode_state(blob.data(), blob.size(), p::HookKind::kLayerwise);
  EXPECT_EQ(back.iter, 42u);
  EXPECT_EQ(back.rng.mt, s.rng.mt);
  EXPECT_EQ(back.rng.pos, s.rng.pos);
  EXPECT_TRUE(back.buckets.at(3).has_pq);
  EXPECT_FALSE(back.buckets.at(7).has_pq);
  EXPECT_EQ(back.buckets.at(3).p, s.buckets[3].p);
  EXPECT_EQ(back.buckets.at(3).q, s.buckets[3].q);
  EXPECT_EQ(back.buckets.at(7).error, s.buckets[7].error);
  auto message = [](const std::string& b, p::HookKind k) -> std::string {
    try {
      p::decode_state(b.data(), b.size(), k);
      return "";
    } catch (const ddph::Error& e) {
      EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
      return e.what();
    }
  };
  EXPECT_NE(message(blob, p::HookKind::kBatched).find("saved by powersgd"), std::string::npos);
  std::string magic = blob, version = blob, flipped = blob;
  magic[0] = 'X';
  version[8] = 2;
  flipped[blob.size() / 2] ^= 1;
  EXPECT_NE(message(magic, p::HookKind::kLayerwise).find("magic"), std::string::npos);
  EXPECT_NE(message(version, p::HookKind::kLayerwise).find("version"), std::string::npos);
  EXPECT_NE(message(flipped, p::HookKind::kLayerwise).find("checksum"), std::string::npos);
  for (size_t cut = 0; cut < blob.size(); ++cut)
    EXPECT_NE(message(blob.substr(0, cut), p::HookKind::kLayerwise), "") << "cut at " << cut;
  EXPECT_NE(message(blob + "x", p::HookKind::kLayerwise), "");
}

}  // namespace
