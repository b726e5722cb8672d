// The PowerSGD math on the GPU, mirroring lowrank.h and orthogonalize.h:
// cuBLAS GEMMs for the three products, a Gram-Schmidt kernel with one block
// per matrix of a batch (rank <= 2), cuSOLVER QR above, and the
// error-feedback add. Everything is enqueued on the stream given to
// set_stream; nothing waits for the GPU, so a step needs no host round trip
// per matrix. Pointers are device pointers; matrices are row-major, like
// the CPU path's and PyTorch's views.
//
// The hooks reach it through cuda/cuda_ops.h; the GPU test
// (tests/powersgd/gpu_math_test.cpp) checks it against the CPU path.
// cuBLAS and cuSOLVER are opened at run time (cuda/blas_api.h).
#pragma once

#include <cstddef>

namespace ddph {
namespace powersgd {

class LowRankCuda {
 public:
  LowRankCuda();  // creates the cuBLAS and cuSOLVER handles
  ~LowRankCuda();
  LowRankCuda(const LowRankCuda&) = delete;
  LowRankCuda& operator=(const LowRankCuda&) = delete;

  // A cudaStream_t; NULL is the default stream.
  void set_stream(void* stream);
  // err += data; a -= b; saturated where finite operands overflow
  // (huge_values.h).
  void add(float* err, const float* data, size_t n);
  void subtract(float* a, const float* b, size_t n);
  // dst = src * factor, saturated.
  void scaled_copy(float* dst, const float* src, size_t n, float factor);
  // math_ops.h's huge-value ops: *flag = 1 if any x is unusable at limit;
  // overflow_to_max and fallback_error elementwise.
  void flag_unusable(const float* x, size_t n, float limit, float* flag);
  void poison_unusable(float* x, size_t n, float limit);
  void saturate_overflow(float* m, const float* data, size_t n);
  void fallback_error(float* err, const float* mean, size_t n);
  // P = M Q; Q = M^T P; out = P Q^T and, when before != NULL, before -= out.
  void multiply_mq(const float* m, int rows, int cols, const float* q, int r, float* p);
  void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q);
  void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                   float* before);
  // `batch` contiguous rows x cols matrices, each orthonormalized as the
  // CPU orthogonalize() does (Gram-Schmidt for cols <= 2, QR above; zero
  // columns stay zero; columns past rows are zeroed).
  void orthogonalize(float* a, int batch, int rows, int cols, float eps);
  // data[i] /= w.
  void divide(float* data, size_t n, int w);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace powersgd
}  // namespace ddph
