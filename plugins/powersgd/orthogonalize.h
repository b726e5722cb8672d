// Orthonormalizing the columns of P and Q, as PyTorch's _orthogonalize:
// Gram-Schmidt for rank <= 2 (with orthogonalization_epsilon), Householder QR
// (LAPACK geqrf + orgqr, what torch.linalg.qr runs) above.
#pragma once

#include <cstddef>

namespace ddph {
namespace powersgd {

// a: a rows x cols matrix, row-major (the layout of PyTorch's (n, r) views).
// Afterwards its columns are orthonormal, except that
//  - a column that is zero, or becomes zero once the earlier columns are
//    projected out, stays zero (PyTorch's Gram-Schmidt divides 0 by 0 and
//    makes NaN there; a zero gradient must not poison the model);
//  - columns past the rows-th cannot be orthogonal to the first rows ones
//    and are set to zero.
// Gram-Schmidt with eps > 0 divides by (norm + eps), as PyTorch does.
// A column holding NaN or Inf comes out non-finite, never zero: Gram-Schmidt
// spreads the NaN down it and into the later columns, QR makes every column
// NaN (LAPACK would refuse the matrix), as it does for values beyond
// kFactorLimit (2^100, huge_values.h), where its reflections could
// overflow. A non-finite gradient must not come back as a finite result or
// as an internal error.
void orthogonalize(float* a, int rows, int cols, float eps);

// Gram-Schmidt alone and QR alone, for tests of each path.
void orthogonalize_gram_schmidt(float* a, int rows, int cols, float eps);
void orthogonalize_qr(float* a, int rows, int cols);

}  // namespace powersgd
}  // namespace ddph
