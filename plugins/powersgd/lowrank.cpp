#include "plugins/powersgd/lowrank.h"

#include <cblas.h>

#include <vector>

namespace ddph {
namespace powersgd {

void multiply_mq(const float* m, int rows, int cols, const float* q, int r, float* p) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, r, cols, 1.0f, m, cols, q, r, 0.0f,
              p, r);
}

void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, r, rows, 1.0f, m, cols, p, r, 0.0f, q,
              r);
}

void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                 float* before) {
  // Q^T (r x cols) first, so each row of the product is r unit-stride axpys
  // the compiler vectorizes.
  std::vector<float> qt(size_t(r) * size_t(cols));
  for (int j = 0; j < cols; ++j)
    for (int k = 0; k < r; ++k) qt[size_t(k) * cols + j] = q[size_t(j) * r + k];
  for (int i = 0; i < rows; ++i) {
    float* __restrict o = out + size_t(i) * cols;
    const float* pi = p + size_t(i) * r;
    const float* __restrict q0 = qt.data();
    const float p0 = pi[0];
    for (int j = 0; j < cols; ++j) o[j] = p0 * q0[j];
    for (int k = 1; k < r; ++k) {
      const float pk = pi[k];
      const float* __restrict qk = qt.data() + size_t(k) * cols;
      for (int j = 0; j < cols; ++j) o[j] += pk * qk[j];
    }
    if (before != nullptr) {
      float* __restrict e = before + size_t(i) * cols;
      for (int j = 0; j < cols; ++j) e[j] -= o[j];
    }
  }
}

}  // namespace powersgd
}  // namespace ddph
