#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/base/error.h"
#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/grid_stride.h"
#include "plugins/powersgd/cuda/blas_api.h"
#include "plugins/powersgd/cuda/lowrank_cuda.h"
#include "plugins/powersgd/huge_values.h"

namespace ddph {
namespace powersgd {
namespace {

constexpr const char* kWho = "powersgd";

void check_blas(cublasStatus_t s, const char* what) {
  DDPH_CHECK(s == CUBLAS_STATUS_SUCCESS, DDPH_INTERNAL,
             "powersgd CUDA: " << what << ": cuBLAS status " << int(s));
}
void check_solver(cusolverStatus_t s, const char* what) {
  DDPH_CHECK(s == CUSOLVER_STATUS_SUCCESS, DDPH_INTERNAL,
             "powersgd CUDA: " << what << ": cuSOLVER status " << int(s));
}

__global__ void add_kernel(float* err, const float* data, size_t n) {
  cuda::grid_stride_loop(n, [&](size_t i) { err[i] = saturated_add(err[i], data[i]); });
}

__global__ void subtract_kernel(float* a, const float* b, size_t n) {
  cuda::grid_stride_loop(n, [&](size_t i) { a[i] = saturated_subtract(a[i], b[i]); });
}

__global__ void scaled_copy_kernel(float* dst, const float* src, size_t n, float factor) {
  cuda::grid_stride_loop(n, [&](size_t i) { dst[i] = saturated_scale(src[i], factor); });
}

__global__ void flag_unusable_kernel(const float* x, size_t n, float limit, float* flag) {
  bool bad = false;
  cuda::grid_stride_loop(n, [&](size_t i) { bad |= unusable_factor(x[i], limit); });
  if (bad) *flag = 1.0f;  // every writer stores the same value
}

__global__ void poison_unusable_kernel(float* x, size_t n, float limit) {
  cuda::grid_stride_loop(n, [&](size_t i) { x[i] = poison_unusable(x[i], limit); });
}

__global__ void saturate_overflow_kernel(float* m, const float* data, size_t n) {
  cuda::grid_stride_loop(n, [&](size_t i) { m[i] = overflow_to_max(m[i], data[i]); });
}

__global__ void fallback_error_kernel(float* err, const float* mean, size_t n) {
  cuda::grid_stride_loop(n, [&](size_t i) { err[i] = fallback_error(err[i], mean[i]); });
}

__global__ void divide_kernel(float* data, size_t n, float w) {
  cuda::grid_stride_loop(n, [&](size_t i) { data[i] /= w; });
}

constexpr int kThreads = 256;

// Sum over the block, in double (as the CPU path sums its norms and dots).
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();
  return r;
}

// One block per matrix: Gram-Schmidt over the columns, as
// orthogonalize_gram_schmidt on the CPU.
__global__ void gram_schmidt_kernel(float* a, int rows, int cols, float eps) {
  __shared__ double shared[kThreads];
  float* m = a + size_t(blockIdx.x) * rows * cols;
  const int usable = min(rows, cols);
  for (int k = 0; k < usable; ++k) {
    double ss = 0;
    for (int i = threadIdx.x; i < rows; i += kThreads) {
      const double v = m[size_t(i) * cols + k];
      ss += v * v;
    }
    const float denom = float(sqrt(block_sum(ss, shared))) + eps;
    for (int i = threadIdx.x; i < rows; i += kThreads) {
      float& v = m[size_t(i) * cols + k];
      v = denom == 0 ? 0.0f : v / denom;  // NaN must spread, as on the CPU
    }
    __syncthreads();
    for (int j = k + 1; j < cols; ++j) {
      double dot = 0;
      for (int i = threadIdx.x; i < rows; i += kThreads)
        dot += double(m[size_t(i) * cols + k]) * m[size_t(i) * cols + j];
      const float d = float(block_sum(dot, shared));
      for (int i = threadIdx.x; i < rows; i += kThreads)
        m[size_t(i) * cols + j] -= d * m[size_t(i) * cols + k];
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < rows; i += kThreads)
    for (int k = usable; k < cols; ++k) m[size_t(i) * cols + k] = 0.0f;
}

// out (cols x rows, row-major) = in (rows x cols, row-major) transposed: a
// row-major matrix to column-major for cuSOLVER, and back.
__global__ void transpose_kernel(const float* in, int rows, int cols, float* out) {
  const size_t n = size_t(rows) * cols;
  cuda::grid_stride_loop(n, [&](size_t i) {
    const size_t r = i / size_t(cols), c = i % size_t(cols);
    out[c * rows + r] = in[i];
  });
}

// Per QR, on the device so that no host reads them: [0] the non-finite
// flag of the input, [1] geqrf's devInfo, [2] orgqr's. cuSOLVER's devInfo is
// non-zero only for an invalid argument (QR itself cannot fail), which would
// be a bug here: the result is then NaN, as for a non-finite input, rather
// than silently wrong, and costs no host synchronization.
constexpr int kQrStatusWords = 3;

// As orthogonalize_qr on the CPU: a NaN or Inf, or a value beyond
// kFactorLimit, among the first `usable` columns makes them all NaN
// (Householder reflections would mix it into every column anyway, and the
// CPU's LAPACKE refuses such a matrix), the rest zero. Decided on the
// device, so the host never waits for the flag.
__global__ void find_nonfinite_kernel(const float* m, int rows, int cols, int usable, int* flag) {
  const size_t n = size_t(rows) * usable;
  cuda::grid_stride_loop(n, [&](size_t i) {
    if (unusable_factor(m[(i / usable) * cols + i % usable], kFactorLimit)) *flag = 1;
  });
}

// status: the QR's words (kQrStatusWords), all zero when the result stands.
__global__ void nan_if_flagged_kernel(float* m, int rows, int cols, int usable, const int* status) {
  bool bad = false;
  for (int k = 0; k < kQrStatusWords; ++k) bad = bad || status[k] != 0;
  if (!bad) return;
  const size_t n = size_t(rows) * cols;
  cuda::grid_stride_loop(
      n, [&](size_t i) { m[i] = int(i % cols) < usable ? __int_as_float(0x7fc00000) : 0.0f; });
}

unsigned grid_for(size_t n) {
  return unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, 65535));
}

// An element-wise kernel over n elements on stream, its launch checked; none
// when n is 0 (a grid of no blocks is a launch error).
template <class... Params, class... Args>
void launch_elementwise(void (*kernel)(Params...), size_t n, cudaStream_t stream, const char* what,
                        Args... args) {
  if (n == 0) return;
  kernel<<<grid_for(n), kThreads, 0, stream>>>(args...);
  DDPH_CUDA_CHECK_LAUNCH(what, kWho);
}

}  // namespace

struct LowRankCuda::Impl {
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cudaStream_t stream = nullptr;
  // QR scratch: a column-major copy, tau, LAPACK workspace; grown on
  // demand (a cudaMalloc only when a larger matrix first appears).
  float* scratch = nullptr;
  size_t scratch_floats = 0;
  int* qr_status = nullptr;  // kQrStatusWords

  float* reserve(size_t floats) {
    if (floats > scratch_floats) {
      float* old = scratch;
      // Forget the old block first: if the new one cannot be had, the next
      // call must not find the freed one.
      scratch = nullptr;
      scratch_floats = 0;
      if (old != nullptr) DDPH_CUDA_CHECK(cudaFree(old), kWho);
      DDPH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch), floats * sizeof(float)), kWho);
      scratch_floats = floats;
    }
    return scratch;
  }

  // Whatever has been made so far.
  void release() {
    cudaFree(scratch);
    cudaFree(qr_status);
    if (solver != nullptr) blas_api().solver_destroy(solver);
    if (blas != nullptr) blas_api().blas_destroy(blas);
  }
};

// cuBLAS/cuSOLVER are loaded (or refused) before anything is allocated.
LowRankCuda::LowRankCuda() : impl_((blas_api(), new Impl)) {
  try {
    check_blas(blas_api().blas_create(&impl_->blas), "cublasCreate");
    check_solver(blas_api().solver_create(&impl_->solver), "cusolverDnCreate");
    DDPH_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&impl_->qr_status), kQrStatusWords * sizeof(int)),
        kWho);
  } catch (...) {
    impl_->release();  // the destructor will not run
    delete impl_;
    throw;
  }
}

LowRankCuda::~LowRankCuda() {
  impl_->release();
  delete impl_;
}

void LowRankCuda::set_stream(void* stream) {
  impl_->stream = static_cast<cudaStream_t>(stream);
  check_blas(blas_api().blas_set_stream(impl_->blas, impl_->stream), "cublasSetStream");
  check_solver(blas_api().solver_set_stream(impl_->solver, impl_->stream), "cusolverDnSetStream");
}

void LowRankCuda::add(float* err, const float* data, size_t n) {
  launch_elementwise(add_kernel, n, impl_->stream, "add kernel", err, data, n);
}

void LowRankCuda::subtract(float* a, const float* b, size_t n) {
  launch_elementwise(subtract_kernel, n, impl_->stream, "subtract kernel", a, b, n);
}

void LowRankCuda::scaled_copy(float* dst, const float* src, size_t n, float factor) {
  launch_elementwise(scaled_copy_kernel, n, impl_->stream, "scaled copy kernel", dst, src, n,
                     factor);
}

void LowRankCuda::flag_unusable(const float* x, size_t n, float limit, float* flag) {
  launch_elementwise(flag_unusable_kernel, n, impl_->stream, "unusable factor kernel", x, n, limit,
                     flag);
}

void LowRankCuda::poison_unusable(float* x, size_t n, float limit) {
  launch_elementwise(poison_unusable_kernel, n, impl_->stream, "poison kernel", x, n, limit);
}

void LowRankCuda::saturate_overflow(float* m, const float* data, size_t n) {
  launch_elementwise(saturate_overflow_kernel, n, impl_->stream, "saturate kernel", m, data, n);
}

void LowRankCuda::fallback_error(float* err, const float* mean, size_t n) {
  launch_elementwise(fallback_error_kernel, n, impl_->stream, "fallback error kernel", err, mean,
                     n);
}

void LowRankCuda::divide(float* data, size_t n, int w) {
  launch_elementwise(divide_kernel, n, impl_->stream, "divide kernel", data, n, float(w));
}

// Row-major X (a x b) is column-major X^T (b x a) with leading dimension b,
// which is how each product below is handed to column-major cuBLAS.
void LowRankCuda::multiply_mq(const float* m, int rows, int cols, const float* q, int r, float* p) {
  const float one = 1.0f, zero = 0.0f;
  // P^T (r x rows) = Q^T (r x cols) M^T (cols x rows).
  check_blas(blas_api().sgemm(impl_->blas, CUBLAS_OP_N, CUBLAS_OP_N, r, rows, cols, &one, q, r, m,
                              cols, &zero, p, r),
             "cublasSgemm (P = M Q)");
}

void LowRankCuda::multiply_mtp(const float* m, int rows, int cols, const float* p, int r,
                               float* q) {
  const float one = 1.0f, zero = 0.0f;
  // Q^T (r x cols) = P^T (r x rows) M (rows x cols).
  check_blas(blas_api().sgemm(impl_->blas, CUBLAS_OP_N, CUBLAS_OP_T, r, cols, rows, &one, p, r, m,
                              cols, &zero, q, r),
             "cublasSgemm (Q = M^T P)");
}

void LowRankCuda::reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                              float* before) {
  const float one = 1.0f, zero = 0.0f, minus_one = -1.0f;
  // out^T (cols x rows) = Q (cols x r) P^T (r x rows).
  check_blas(blas_api().sgemm(impl_->blas, CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, r, &one, q, r, p,
                              r, &zero, out, cols),
             "cublasSgemm (P Q^T)");
  if (before != nullptr) {
    // before -= P Q^T, as a second product rather than a read of out, so
    // that it needs no ordering against other writers of out.
    check_blas(blas_api().sgemm(impl_->blas, CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, r, &minus_one, q,
                                r, p, r, &one, before, cols),
               "cublasSgemm (error)");
  }
}

void LowRankCuda::orthogonalize(float* a, int batch, int rows, int cols, float eps) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  if (cols <= 2) {
    gram_schmidt_kernel<<<unsigned(batch), kThreads, 0, impl_->stream>>>(a, rows, cols, eps);
    DDPH_CUDA_CHECK_LAUNCH("Gram-Schmidt kernel", kWho);
    return;
  }
  const int usable = std::min(rows, cols);
  int lwork_qr = 0, lwork_q = 0;
  float* w = impl_->reserve(size_t(rows) * cols);  // sizes first: reserve may reallocate
  check_solver(blas_api().geqrf_buffer_size(impl_->solver, rows, usable, w, rows, &lwork_qr),
               "geqrf buffer size");
  check_solver(
      blas_api().orgqr_buffer_size(impl_->solver, rows, usable, usable, w, rows, nullptr, &lwork_q),
      "orgqr buffer size");
  const size_t lwork = size_t(std::max(lwork_qr, lwork_q));
  w = impl_->reserve(size_t(rows) * cols + size_t(usable) + lwork);
  float* tau = w + size_t(rows) * cols;
  float* work = tau + usable;
  const size_t n = size_t(rows) * cols;
  for (int b = 0; b < batch; ++b) {
    float* m = a + size_t(b) * n;
    // All words, though cuSOLVER writes its two: a word it skipped must not
    // hold an older matrix's value.
    int* status = impl_->qr_status;
    int* flag = status;
    DDPH_CUDA_CHECK(cudaMemsetAsync(status, 0, kQrStatusWords * sizeof(int), impl_->stream), kWho);
    find_nonfinite_kernel<<<grid_for(size_t(rows) * usable), kThreads, 0, impl_->stream>>>(
        m, rows, cols, usable, flag);
    DDPH_CUDA_CHECK_LAUNCH("non-finite check kernel", kWho);
    // Column-major (rows x cols) for cuSOLVER is row-major (cols x rows).
    transpose_kernel<<<grid_for(n), kThreads, 0, impl_->stream>>>(m, rows, cols, w);
    DDPH_CUDA_CHECK_LAUNCH("transpose kernel", kWho);
    check_solver(
        blas_api().geqrf(impl_->solver, rows, usable, w, rows, tau, work, int(lwork), status + 1),
        "cusolverDnSgeqrf");
    check_solver(blas_api().orgqr(impl_->solver, rows, usable, usable, w, rows, tau, work,
                                  int(lwork), status + 2),
                 "cusolverDnSorgqr");
    if (usable < cols)
      DDPH_CUDA_CHECK(
          cudaMemsetAsync(w + size_t(rows) * usable, 0,
                          size_t(rows) * (cols - usable) * sizeof(float), impl_->stream),
          kWho);
    transpose_kernel<<<grid_for(n), kThreads, 0, impl_->stream>>>(w, cols, rows, m);
    DDPH_CUDA_CHECK_LAUNCH("transpose kernel", kWho);
    nan_if_flagged_kernel<<<grid_for(n), kThreads, 0, impl_->stream>>>(m, rows, cols, usable,
                                                                       status);
    DDPH_CUDA_CHECK_LAUNCH("non-finite result kernel", kWho);
  }
}

}  // namespace powersgd
}  // namespace ddph
