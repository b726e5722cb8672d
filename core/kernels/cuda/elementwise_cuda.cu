#include "core/kernels/cuda/elementwise_cuda.h"

#include "core/kernels/cuda/grid_stride.h"
#include "core/kernels/scalar.h"

namespace ddph {
namespace cuda {
namespace {

using kernels::bf16_bits_to_f32;
using kernels::f16_bits_to_f32;
using kernels::f32_to_bf16_bits;
using kernels::f32_to_f16_bits;

constexpr int kThreads = 256;

// Grid-stride loops, capped so a huge bucket does not ask for more blocks
// than the grid allows.
unsigned blocks_for(size_t n) {
  const size_t want = (n + kThreads - 1) / kThreads;
  return unsigned(want < 65535 ? (want == 0 ? 1 : want) : 65535);
}

template <class F>
__global__ void for_each_index(size_t n, F f) {
  grid_stride_loop(n, f);
}

template <class F>
cudaError_t launch(size_t n, cudaStream_t stream, F f) {
  if (n == 0) return cudaSuccess;
  for_each_index<<<blocks_for(n), kThreads, 0, stream>>>(n, f);
  return cudaGetLastError();
}

// One element as float on the way down, as cast_into() reads it (float64
// goes through float32, as torch's double -> Half does).
template <class T>
__device__ float as_f32(const T* p, size_t i) {
  return float(p[i]);
}

__device__ uint16_t to_low(DType low, float x) {
  return low == DType::F16 ? f32_to_f16_bits(x) : f32_to_bf16_bits(x);
}
__device__ float from_low(DType low, uint16_t x) {
  return low == DType::F16 ? f16_bits_to_f32(x) : bf16_bits_to_f32(x);
}

bool is_low(DType t) {
  return t == DType::F16 || t == DType::BF16;
}
bool is_wide(DType t) {
  return t == DType::F32 || t == DType::F64;
}

}  // namespace

cudaError_t divide_inplace(DType dtype, void* data, size_t n, int64_t w, cudaStream_t stream) {
  if (w < 1) return cudaErrorInvalidValue;
  switch (dtype) {
    case DType::F32: {
      float* p = static_cast<float*>(data);
      const float fw = float(w);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = p[i] / fw; });
    }
    case DType::F64: {
      double* p = static_cast<double*>(data);
      const double dw = double(w);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = p[i] / dw; });
    }
    case DType::F16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      const float fw = float(w);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = kernels::f16_div(p[i], fw); });
    }
    case DType::BF16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      const float fw = float(w);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = kernels::bf16_div(p[i], fw); });
    }
    case DType::I32: {
      int32_t* p = static_cast<int32_t*>(data);
      // Any int32 divided by w > INT32_MAX truncates to zero, as on the CPU.
      if (w > INT32_MAX) return cudaMemsetAsync(p, 0, n * sizeof(int32_t), stream);
      const int32_t iw = int32_t(w);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = p[i] / iw; });
    }
    case DType::I64: {
      int64_t* p = static_cast<int64_t*>(data);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = p[i] / w; });
    }
    case DType::U8: {
      uint8_t* p = static_cast<uint8_t*>(data);
      if (w > 255) return cudaMemsetAsync(p, 0, n, stream);
      const uint8_t uw = uint8_t(w);
      return launch(n, stream, [=] __device__(size_t i) { p[i] = uint8_t(p[i] / uw); });
    }
  }
  return cudaErrorInvalidValue;
}

cudaError_t cast_into(DType from, const void* src, DType to, void* dst, size_t n,
                      cudaStream_t stream) {
  if (from == to) return cudaMemcpyAsync(dst, src, n * dtype_size(from), cudaMemcpyDeviceToDevice,
                                         stream);
  if (is_wide(from) && is_low(to)) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (from == DType::F32) {
      const float* s = static_cast<const float*>(src);
      return launch(n, stream, [=] __device__(size_t i) { d[i] = to_low(to, s[i]); });
    }
    const double* s = static_cast<const double*>(src);
    return launch(n, stream, [=] __device__(size_t i) { d[i] = to_low(to, as_f32(s, i)); });
  }
  if (is_low(from) && is_wide(to)) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    if (to == DType::F32) {
      float* d = static_cast<float*>(dst);
      return launch(n, stream, [=] __device__(size_t i) { d[i] = from_low(from, s[i]); });
    }
    double* d = static_cast<double*>(dst);
    return launch(n, stream, [=] __device__(size_t i) { d[i] = double(from_low(from, s[i])); });
  }
  return cudaErrorInvalidValue;
}

cudaError_t cast_div_into(DType from, const void* src, DType low, uint16_t* dst, size_t n,
                          int64_t w, cudaStream_t stream) {
  if (w < 1 || !is_low(low) || !(is_wide(from) || from == low)) return cudaErrorInvalidValue;
  const float fw = float(w);
  if (from == low) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    return launch(n, stream, [=] __device__(size_t i) {
      dst[i] = to_low(low, from_low(low, s[i]) / fw);
    });
  }
  if (from == DType::F32) {
    const float* s = static_cast<const float*>(src);
    return launch(n, stream, [=] __device__(size_t i) {
      dst[i] = to_low(low, from_low(low, to_low(low, s[i])) / fw);
    });
  }
  const double* s = static_cast<const double*>(src);
  return launch(n, stream, [=] __device__(size_t i) {
    dst[i] = to_low(low, from_low(low, to_low(low, as_f32(s, i))) / fw);
  });
}

}  // namespace cuda
}  // namespace ddph
