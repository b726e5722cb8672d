#include "plugins/powersgd/cuda/blas_api.h"

#include <dlfcn.h>

#include <string>

#include "core/base/error.h"

#define DDPH_STR2(x) #x
#define DDPH_STR(x) DDPH_STR2(x)

namespace ddph {
namespace powersgd {
namespace {

// Never closed: the handles live as long as the process may use them.
void* open_library(const char* soname) {
  void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) return lib;
  const char* first = dlerror();
  std::string reason = first != nullptr ? first : "?";
#ifdef DDPH_CUDA_LIBRARY_DIR
  const std::string path = std::string(DDPH_CUDA_LIBRARY_DIR) + "/" + soname;
  lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) return lib;
  const char* second = dlerror();
  reason += std::string("; ") + (second != nullptr ? second : "?");
#endif
  DDPH_FAIL(DDPH_UNSUPPORTED, "powersgd: a CUDA bucket needs "
                                  << soname << " (CUDA toolkit), "
                                  << "which cannot be loaded: " << reason);
}

template <class F>
void bind(void* lib, const char* library, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  DDPH_CHECK(out != nullptr, DDPH_UNSUPPORTED,
             "powersgd: " << library << " has no " << symbol << " (an older toolkit?)");
}

BlasApi load() {
  const char* blas_name = "libcublas.so." DDPH_STR(CUBLAS_VER_MAJOR);
  const char* solver_name = "libcusolver.so." DDPH_STR(CUSOLVER_VER_MAJOR);
  void* blas = open_library(blas_name);
  void* solver = open_library(solver_name);
  BlasApi api{};
  bind(blas, blas_name, "cublasCreate_v2", api.blas_create);
  bind(blas, blas_name, "cublasDestroy_v2", api.blas_destroy);
  bind(blas, blas_name, "cublasSetStream_v2", api.blas_set_stream);
  bind(blas, blas_name, "cublasSgemm_v2", api.sgemm);
  bind(solver, solver_name, "cusolverDnCreate", api.solver_create);
  bind(solver, solver_name, "cusolverDnDestroy", api.solver_destroy);
  bind(solver, solver_name, "cusolverDnSetStream", api.solver_set_stream);
  bind(solver, solver_name, "cusolverDnSgeqrf_bufferSize", api.geqrf_buffer_size);
  bind(solver, solver_name, "cusolverDnSorgqr_bufferSize", api.orgqr_buffer_size);
  bind(solver, solver_name, "cusolverDnSgeqrf", api.geqrf);
  bind(solver, solver_name, "cusolverDnSorgqr", api.orgqr);
  return api;
}

}  // namespace

const BlasApi& blas_api() {
  // A failed load throws out of the initializer and is retried next time
  // (the toolkit may have been installed since).
  static const BlasApi api = load();
  return api;
}

}  // namespace powersgd
}  // namespace ddph
