// The three matrix products of a PowerSGD step on one n x m matrix M
// (row-major, the (shape[0], -1) view of a gradient) with rank-r factors P
// (n x r) and Q (m x r), both row-major like PyTorch's views.
//
// The products are memory-bound (r is 1 to 4 in practice): what costs is
// passes over M. So for r <= 4 each is one streaming pass of a hand-fused
// kernel (vectorized per ISA level, chosen at run time); larger r goes to
// cblas_sgemm.
#pragma once

#include <cstddef>

namespace ddph {
namespace powersgd {

// Last step's factors P' (rows x r) and Q' (cols x r) of a matrix whose
// error is deferred: the error buffer still holds last step's M, and the
// error is M - P' Q'^T, with exactly reconstruct's bits. Settling it later
// saves the reconstruction's read and write of the error buffer: the next
// P = M Q reads that buffer anyway.
struct Pending {
  const float* p = nullptr;
  const float* q = nullptr;
};

// P = M Q, where M = data, or with error feedback (err != NULL) M = data +
// err, which is written to err on the way (it is needed again for M^T P and
// for the new error). With `pending` set, err is in deferred form and M =
// data + (err - P' Q'^T): the same bits as settling the error first.
void multiply_mq(const float* data, float* err, int rows, int cols, const float* q, int r, float* p,
                 Pending pending = Pending{});
// Q = M^T P.
void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q);
// out = P Q^T. With error feedback, `before` holds M before compression and
// becomes M - P Q^T, the new error, in the same pass over each row while it
// is in cache; `before` may be NULL. out may alias nothing else. out NULL:
// only before -= P Q^T (settling a deferred error).
void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                 float* before);

}  // namespace powersgd
}  // namespace ddph
