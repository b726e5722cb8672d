// The three matrix products of a PowerSGD step on one n x m matrix M
// (row-major, the (shape[0], -1) view of a gradient) with rank-r factors P
// (n x r) and Q (m x r), both row-major like PyTorch's views.
#pragma once

#include <cstddef>

namespace ddph {
namespace powersgd {

// P = M Q (cblas_sgemm).
void multiply_mq(const float* m, int rows, int cols, const float* q, int r, float* p);
// Q = M^T P (cblas_sgemm).
void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q);
// out = P Q^T. With error feedback, `before` holds M before compression and
// becomes M - P Q^T, the new error, in the same pass over each row while it
// is in cache; `before` may be NULL. out may alias nothing else.
void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                 float* before);

}  // namespace powersgd
}  // namespace ddph
