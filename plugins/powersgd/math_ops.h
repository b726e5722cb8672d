// The arithmetic of a PowerSGD step, behind one interface with a host
// implementation (lowrank.h, orthogonalize.h) and a CUDA one
// (cuda/cuda_ops.h: cuBLAS, cuSOLVER and small kernels on the bucket's
// stream). The hooks hold the logic (plans, steps, state) once and call
// these on whatever memory the bucket is in, so the CPU tests exercise the
// same step the GPU runs.
//
// Every pointer is in the implementation's memory (host or device). The
// calls enqueue and return; only download() waits.
#pragma once

#include <cstddef>
#include <memory>

namespace ddph {
namespace powersgd {

class LowRankOps {
 public:
  virtual ~LowRankOps() = default;

  // Later calls are ordered on this stream (a cudaStream_t; ignored on the host).
  virtual void set_stream(void* stream) = 0;

  // a += b; a -= b; dst = src; dst = 0 (n floats each). The sums saturate
  // where finite operands overflow (huge_values.h).
  virtual void add(float* a, const float* b, size_t n) = 0;
  virtual void subtract(float* a, const float* b, size_t n) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  virtual void zero(float* dst, size_t n) = 0;
  // dst = src * factor, saturated (huge_values.h's saturated_scale).
  virtual void scaled_copy(float* dst, const float* src, size_t n, float factor) = 0;

  // Huge values (huge_values.h). *flag (one float in this memory) becomes 1
  // if any of x's n values is unusable_factor at `limit`, else stays.
  virtual void flag_unusable(const float* x, size_t n, float limit, float* flag) = 0;
  // x[i] = NaN where it is unusable_factor at `limit`: a rank's own factor
  // that is too large makes the sum over ranks NaN, which every rank sees.
  virtual void poison_unusable(float* x, size_t n, float limit) = 0;
  // Whether *flag is set, on the host: on a GPU the step's one host wait,
  // for the work ordered before it on the stream.
  virtual bool flag_set(const float* flag) = 0;
  // m[i] = overflow_to_max(m[i], data[i]); err[i] = fallback_error(err[i],
  // mean[i]) (n floats each).
  virtual void saturate_overflow(float* m, const float* data, size_t n) = 0;
  virtual void fallback_error(float* err, const float* mean, size_t n) = 0;

  // lowrank.h's three products, with its contracts (multiply_mq adds data
  // to err first when err != NULL and reads M from err).
  virtual void multiply_mq(const float* data, float* err, int rows, int cols, const float* q, int r,
                           float* p) = 0;
  virtual void multiply_mtp(const float* m, int rows, int cols, const float* p, int r,
                            float* q) = 0;
  virtual void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                           float* before) = 0;
  // Whether the error may stay in deferred form between steps (lowrank.h's
  // Pending: M kept, M - P' Q'^T formed by the next P = M Q). Host only: the
  // CUDA step keeps the eager form it was tested with. Where it is true,
  // multiply_mq_deferred runs, and reconstruct accepts out == NULL.
  virtual bool defers_error() const { return false; }
  virtual void multiply_mq_deferred(const float* data, float* err, int rows, int cols,
                                    const float* q, int r, float* p, const float* p_last,
                                    const float* q_last);
  // orthogonalize.h on `batch` contiguous rows x cols matrices.
  virtual void orthogonalize(float* a, int batch, int rows, int cols, float eps) = 0;

  // (Memory that outlives a step, P, Q and errors, is core's
  // resident_floats.h: resident_factors.h.)
  // n floats from / to host memory. After upload returns the host memory
  // may change; download waits for the work ordered before it, so the host
  // may read the result at once.
  virtual void upload(float* dst, const float* host, size_t n) = 0;
  virtual void download(float* host, const float* src, size_t n) = 0;
};

// The host implementation (stateless; one for the process).
LowRankOps& cpu_ops();

// The CUDA implementation for GPU `device` (cuda/cuda_ops.cpp), only in a
// build with CUDA: ops_by_device.cpp calls it. Throws DDPH_UNSUPPORTED where
// cuBLAS/cuSOLVER cannot be loaded.
std::unique_ptr<LowRankOps> make_cuda_ops(int device);

}  // namespace powersgd
}  // namespace ddph
