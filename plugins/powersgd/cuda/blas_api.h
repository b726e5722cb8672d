// cuBLAS and cuSOLVER, opened with dlopen when the first CUDA bucket
// arrives. The toolkit ships them only as shared libraries; linked
// normally, they would be needed to load the plugin at all, and the plugin
// must load on hosts without CUDA (docs/cuda.md).
#pragma once

#include <cublas_v2.h>
#include <cusolverDn.h>

namespace ddph {
namespace powersgd {

// The calls LowRankCuda makes, by their real (versioned) names.
struct BlasApi {
  decltype(&cublasCreate_v2) blas_create;
  decltype(&cublasDestroy_v2) blas_destroy;
  decltype(&cublasSetStream_v2) blas_set_stream;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cusolverDnCreate) solver_create;
  decltype(&cusolverDnDestroy) solver_destroy;
  decltype(&cusolverDnSetStream) solver_set_stream;
  decltype(&cusolverDnSgeqrf_bufferSize) geqrf_buffer_size;
  decltype(&cusolverDnSorgqr_bufferSize) orgqr_buffer_size;
  decltype(&cusolverDnSgeqrf) geqrf;
  decltype(&cusolverDnSorgqr) orgqr;
};

// Loaded once per process: libcublas.so.<major> and libcusolver.so.<major>
// of the toolkit built against, by the loader's search path, then from the
// toolkit's lib folder as configured. Throws DDPH_UNSUPPORTED naming the
// library and dlerror()'s reason when either is missing.
const BlasApi& blas_api();

}  // namespace powersgd
}  // namespace ddph
