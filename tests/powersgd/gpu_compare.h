// What the powersgd GPU tests share: deterministic gradients, and the
// comparison of a GPU result with the CPU path's within a tolerance derived
// from fp32 rounding.
//
// The tolerance. The two paths share every step of the logic (psgd_hook.cpp,
// the compression steps, math_ops.h) but not the sums inside the products: cuBLAS and the CPU's
// fused kernels/OpenBLAS add the K terms of each dot product in different
// orders, and cuSOLVER's Householder QR blocks differently from LAPACK's.
// Each dot product of length K carries at most gamma_K = K u |a|.|b| of
// rounding (u = 2^-24), so the two paths differ by at most 2 K u per
// product relative to the scale of the values. Orthonormalizing P or Q can
// amplify a perturbation by the condition number of the matrix it
// orthonormalizes; for the bell-shaped gradients and sizes of these tests
// (at most 31 x 31, rank <= 4) that is below 10, and we allow
// kAmplification = 100. Error feedback and warm start carry a step's
// difference into the next, so the bound grows with the compressed steps:
//   tol = compressed_steps * kAmplification * 2 * K_max * u,
// relative to the largest magnitude of the CPU's values (about 1e-3 for
// K_max = 31 and 3 steps); a wrong index, layout or missing term is off by
// O(1).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ddph_test {
namespace psgd {

constexpr double kAmplification = 100;

inline double gpu_tolerance(int k_max, int compressed_steps) {
  return compressed_steps * kAmplification * 2.0 * k_max * std::ldexp(1.0, -24);
}

// Bell-shaped, bounded values, different per (rank, bucket, step).
inline std::vector<float> gpu_gradients(size_t n, int rank, uint64_t index, int step) {
  std::vector<float> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull * (index + 1) + uint64_t(step) * 0xBF58476D1CE4E5B9ull +
               uint64_t(rank) * 0x94D049BB133111EBull;
  for (float& f : v) {
    double s = 0;
    for (int k = 0; k < 4; ++k) {  // a sum of uniforms
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      s += double(x >> 11) / double(1ull << 53) - 0.5;
    }
    f = float(s * 1.7);
  }
  return v;
}

// |got - want| <= tol * max |want|, element by element.
inline ::testing::AssertionResult gpu_close(const std::vector<float>& got,
                                            const std::vector<float>& want, double tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.size();
  double scale = 1e-30;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol * scale))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << ", want "
                                           << want[i] << " (tolerance " << tol * scale << ")";
  return ::testing::AssertionSuccess();
}

}  // namespace psgd
}  // namespace ddph_test
