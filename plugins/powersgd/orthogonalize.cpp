#include "plugins/powersgd/orthogonalize.h"

#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/error.h"
#include "plugins/powersgd/huge_values.h"

namespace ddph {
namespace powersgd {
namespace {

void zero_columns(float* a, int rows, int cols, int from) {
  for (int i = 0; i < rows; ++i)
    for (int k = from; k < cols; ++k) a[size_t(i) * cols + k] = 0.0f;
}

}  // namespace

void orthogonalize_gram_schmidt(float* a, int rows, int cols, float eps) {
  const int usable = std::min(rows, cols);
  for (int k = 0; k < usable; ++k) {
    // Norms in double: one rounding instead of rows of them, so a column
    // that is exactly zero is recognised and a tiny one does not underflow.
    double ss = 0;
    for (int i = 0; i < rows; ++i) ss += double(a[size_t(i) * cols + k]) * a[size_t(i) * cols + k];
    const float norm = float(std::sqrt(ss));
    const float denom = norm + eps;
    // Only an exactly zero column is kept at zero. A NaN norm must not take
    // that branch (NaN > 0 is false): it would turn a NaN gradient into a
    // finite zero result; dividing spreads the NaN instead.
    for (int i = 0; i < rows; ++i) {
      float& v = a[size_t(i) * cols + k];
      v = denom == 0 ? 0.0f : v / denom;
    }
    for (int j = k + 1; j < cols; ++j) {
      double dot = 0;
      for (int i = 0; i < rows; ++i)
        dot += double(a[size_t(i) * cols + k]) * a[size_t(i) * cols + j];
      const float d = float(dot);
      for (int i = 0; i < rows; ++i) a[size_t(i) * cols + j] -= d * a[size_t(i) * cols + k];
    }
  }
  zero_columns(a, rows, cols, usable);
}

void orthogonalize_qr(float* a, int rows, int cols) {
  const int usable = std::min(rows, cols);
  if (usable == 0) return;
  // LAPACKE handles the row-major layout (it transposes through a copy).
  // Only the first `usable` columns take part; the rest are zeroed below.
  // LAPACKE refuses a matrix holding NaN (info -4: its NaN check) and
  // Householder reflections would mix a NaN or Inf into every column anyway:
  // the result is NaN, as the math gives, instead of an internal error.
  // Beyond kFactorLimit the reflections themselves may overflow into NaN,
  // which sorgqr's NaN check would refuse: NaN as well (the hooks average
  // such a matrix uncompressed, huge_values.h).
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < usable; ++k)
      if (unusable_factor(a[size_t(i) * cols + k], kFactorLimit)) {
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < usable; ++c) a[size_t(r) * cols + c] = std::nanf("");
        zero_columns(a, rows, cols, usable);
        return;
      }
  std::vector<float> tau(static_cast<size_t>(usable));
  lapack_int info = LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, rows, usable, a, cols, tau.data());
  DDPH_CHECK(info == 0, DDPH_INTERNAL, "powersgd: LAPACKE_sgeqrf failed (info " << info << ")");
  info = LAPACKE_sorgqr(LAPACK_ROW_MAJOR, rows, usable, usable, a, cols, tau.data());
  DDPH_CHECK(info == 0, DDPH_INTERNAL, "powersgd: LAPACKE_sorgqr failed (info " << info << ")");
  zero_columns(a, rows, cols, usable);
}

void orthogonalize(float* a, int rows, int cols, float eps) {
  if (cols <= 2)
    orthogonalize_gram_schmidt(a, rows, cols, eps);
  else
    orthogonalize_qr(a, rows, cols);
}

}  // namespace powersgd
}  // namespace ddph
