// The CUDA math (cuda/lowrank_cuda.h) against the CPU path (lowrank.h,
// orthogonalize.h) on the same inputs, within fp32 tolerance (cuBLAS sums in
// its own order). Without a usable GPU every test skips with one line saying
// why (libcudart loads the driver lazily; none is needed to start).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "plugins/powersgd/cuda/lowrank_cuda.h"
#include "plugins/powersgd/lowrank.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/orthogonalize.h"
#include "tests/powersgd/huge_operands.h"
#include "tests/support/cuda_device.h"

namespace {

namespace p = ddph::powersgd;

using Dev = ddph_test::DeviceVec<float>;

std::vector<float> random(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 1e-30;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * scale) << "element " << i;
}

TEST(GpuMath, ProductsMatchCpu) {
  DDPH_SKIP_WITHOUT_GPU();
  p::LowRankCuda gpu;
  const int n = 300, m = 257;
  for (int r : {1, 2, 4, 7}) {
    const std::vector<float> mat = random(size_t(n) * m, 1), q = random(size_t(m) * r, 2),
                             pin = random(size_t(n) * r, 3);
    std::vector<float> p_cpu(size_t(n) * r), q_cpu(size_t(m) * r), out_cpu(size_t(n) * m),
        before_cpu = mat;
    p::multiply_mq(mat.data(), nullptr, n, m, q.data(), r, p_cpu.data());
    p::multiply_mtp(mat.data(), n, m, pin.data(), r, q_cpu.data());
    p::reconstruct(pin.data(), q.data(), n, m, r, out_cpu.data(), before_cpu.data());
    Dev dm(mat), dq(q), dp(pin), dp_out(p_cpu), dq_out(q_cpu), dout(out_cpu), dbefore(mat);
    gpu.multiply_mq(dm.get(), n, m, dq.get(), r, dp_out.get());
    gpu.multiply_mtp(dm.get(), n, m, dp.get(), r, dq_out.get());
    gpu.reconstruct(dp.get(), dq.get(), n, m, r, dout.get(), dbefore.get());
    expect_close(dp_out.host(), p_cpu, 1e-5);
    expect_close(dq_out.host(), q_cpu, 1e-5);
    expect_close(dout.host(), out_cpu, 1e-5);
    expect_close(dbefore.host(), before_cpu, 1e-5);
  }
}

TEST(GpuMath, OrthogonalizeMatchesCpu) {
  DDPH_SKIP_WITHOUT_GPU();
  p::LowRankCuda gpu;
  for (int cols : {1, 2, 3, 4, 6}) {
    const int rows = 200, batch = 3;
    std::vector<float> a = random(size_t(batch) * rows * cols, uint32_t(cols)), cpu = a;
    for (int b = 0; b < batch; ++b)
      p::orthogonalize(cpu.data() + size_t(b) * rows * cols, rows, cols, 0);
    Dev d(a);
    gpu.orthogonalize(d.get(), batch, rows, cols, 0);
    expect_close(d.host(), cpu, 1e-4);
  }
  // Zero matrices: no NaN, as on the CPU; rank above the rows: zero columns.
  for (int cols : {2, 4}) {
    std::vector<float> z(size_t(10) * cols, 0.0f), cpu = z;
    p::orthogonalize(cpu.data(), 10, cols, 0);
    Dev d(z);
    gpu.orthogonalize(d.get(), 1, 10, cols, 0);
    for (float v : d.host()) EXPECT_TRUE(std::isfinite(v));
  }
  std::vector<float> wide = random(3 * 5, 9), cpu = wide;
  p::orthogonalize(cpu.data(), 3, 5, 0);
  Dev d(wide);
  gpu.orthogonalize(d.get(), 1, 3, 5, 0);
  expect_close(d.host(), cpu, 1e-4);
}

// A NaN or Inf in the matrix: as on the CPU, QR (cols > 2) makes the first
// min(rows, cols) columns NaN and the rest zero (the CPU's own bits, NaN
// payload included); Gram-Schmidt spreads the NaN down the column and into
// the later ones, so the NaN positions match the CPU's.
TEST(GpuMath, NonFiniteMatricesComeOutAsOnTheCpu) {
  DDPH_SKIP_WITHOUT_GPU();
  p::LowRankCuda gpu;
  for (float bad : {std::nanf(""), INFINITY}) {
    for (auto [rows, cols] : {std::pair<int, int>{8, 4}, {3, 5}, {8, 2}, {8, 1}}) {
      std::vector<float> a = random(size_t(rows) * cols, 11), cpu;
      a[size_t(rows / 2) * cols] = bad;  // column 0
      cpu = a;
      p::orthogonalize(cpu.data(), rows, cols, 0);
      Dev d(a);
      gpu.orthogonalize(d.get(), 1, rows, cols, 0);
      const std::vector<float> got = d.host();
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(std::isnan(got[i]), std::isnan(cpu[i]))
            << rows << " x " << cols << " with " << bad << ": element " << i;
        if (cols > 2) {
          EXPECT_EQ(std::memcmp(&got[i], &cpu[i], sizeof(float)), 0)
              << rows << " x " << cols << ": element " << i;
        }
      }
    }
  }
}

TEST(GpuMath, AddSubtractAndDivide) {
  DDPH_SKIP_WITHOUT_GPU();
  p::LowRankCuda gpu;
  const std::vector<float> a = random(10001, 4), b = random(10001, 5);
  Dev da(a), db(b);
  gpu.add(da.get(), db.get(), a.size());
  gpu.divide(da.get(), a.size(), 3);
  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = (a[i] + b[i]) / 3.0f;
  EXPECT_EQ(da.host(), want);
  gpu.subtract(da.get(), db.get(), a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] -= b[i];
  EXPECT_EQ(da.host(), want);
}

// The huge-value ops (math_ops.h, huge_values.h) give the host ops' bits:
// saturated sums and products, overflowed M as +-FLT_MAX, NaN errors where
// the mean is not finite, poisoned factors and the flag.
TEST(GpuMath, HugeValueOpsMatchTheHostOps) {
  DDPH_SKIP_WITHOUT_GPU();
  p::LowRankCuda gpu;
  std::vector<float> a, b;
  ddph_test::psgd::huge_operand_pairs(a, b);
  const size_t n = a.size();
  p::LowRankOps& host = p::cpu_ops();
  auto same = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(std::isnan(got[i]) ? std::isnan(want[i]) : got[i] == want[i])
          << what << " [" << i << "]: " << got[i] << ", host " << want[i];
  };
  std::vector<float> h_sum = a, h_diff = a, h_scaled(n), h_m = a, h_err = a, h_poison = a;
  host.add(h_sum.data(), b.data(), n);
  host.subtract(h_diff.data(), b.data(), n);
  host.scaled_copy(h_scaled.data(), a.data(), n, 4.0f);
  host.saturate_overflow(h_m.data(), b.data(), n);
  host.fallback_error(h_err.data(), b.data(), n);
  host.poison_unusable(h_poison.data(), n, 0x1p100f);
  Dev d_sum(a), d_diff(a), d_scaled(n), d_m(a), d_err(a), d_poison(a), d_b(b), d_flag(1);
  // d_flag starts at 0 (DeviceVec zeroes); b holds NaN, Inf and 3e38 > 2^100.
  gpu.add(d_sum.get(), d_b.get(), n);
  gpu.subtract(d_diff.get(), d_b.get(), n);
  Dev d_a(a);
  gpu.scaled_copy(d_scaled.get(), d_a.get(), n, 4.0f);
  gpu.saturate_overflow(d_m.get(), d_b.get(), n);
  gpu.fallback_error(d_err.get(), d_b.get(), n);
  gpu.poison_unusable(d_poison.get(), n, 0x1p100f);
  gpu.flag_unusable(d_b.get(), n, 0x1p100f, d_flag.get());
  same(d_sum.host(), h_sum, "add");
  same(d_diff.host(), h_diff, "subtract");
  same(d_scaled.host(), h_scaled, "scaled_copy");
  same(d_m.host(), h_m, "saturate_overflow");
  same(d_err.host(), h_err, "fallback_error");
  same(d_poison.host(), h_poison, "poison_unusable");
  EXPECT_EQ(d_flag.host()[0], 1.0f);
}

}  // namespace
