// The element-wise CUDA kernels: dequantize (into or added to a float
// buffer), bit packing for the wire, and the finiteness check. Each is a
// direct image of its CPU loop in quant_loops.inc, over quant_math.h.
#include "core/quant/kernels/quant_cuda.h"
#include "core/quant/kernels/quant_math.h"
#include "core/quant/kernels/quant_tiles_cuda.h"

namespace ddph {
namespace quantization {
namespace {

using tiles::kThreads;
using tiles::Range;
using tiles::Tiles;

template <bool kAdd>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* q, Tiles t, const QParams* params, float* out) {
  for (size_t b = blockIdx.x; b < t.blocks; b += gridDim.x) {
    const Range rg = tiles::tile_range(t, b);
    const QParams p = params[rg.c];
    for (size_t i = rg.begin + threadIdx.x; i < rg.end; i += kThreads) {
      const float d = dequantize(q[i], p);
      out[i] = kAdd ? qm_add(out[i], d) : d;
    }
  }
}

template <bool kAdd>
cudaError_t launch_dequantize(const uint8_t* q, size_t n, size_t channel, const QParams* params,
                              float* out, cudaStream_t s) {
  const Tiles t = tiles::make_tiles(n, channel);
  if (t.blocks == 0) return cudaSuccess;
  dequantize_kernel<kAdd><<<tiles::grid_blocks(t), kThreads, 0, s>>>(q, t, params, out);
  return cudaGetLastError();
}

// The channel of each tile: its contributions' bounds decide, the same
// for every thread of the block, whether the double sum replaces out.
__global__ void __launch_bounds__(kThreads)
    wide_means_kernel(const uint8_t* first, size_t stride, size_t count, Tiles t, size_t head,
                      int bits, int world, float* out) {
  const int qmax = (1 << bits) - 1;
  for (size_t b = blockIdx.x; b < t.blocks; b += gridDim.x) {
    const Range rg = tiles::tile_range(t, b);
    double bound = 0;
    for (size_t k = 0; k < count; ++k) {
      const QParams p = reinterpret_cast<const QParams*>(first + k * stride)[rg.c];
      bound = qm_dadd(bound, dequantized_bound(p, qmax));
    }
    if (!float_sum_may_overflow(bound, count)) continue;
    for (size_t i = rg.begin + threadIdx.x; i < rg.end; i += kThreads) {
      double sum = 0;
      for (size_t k = 0; k < count; ++k) {
        const uint8_t* in = first + k * stride;
        const QParams p = reinterpret_cast<const QParams*>(in)[rg.c];
        sum = qm_dadd(sum, dequantize_wide(packed_code(in + head, i, bits), p));
      }
      out[i] = mean_wide(sum, world);
    }
  }
}

// One thread per packed byte; codes are masked to `bits` and the unused
// high bits of the last byte stay zero, as in pack_tail.
__global__ void pack_kernel(const uint8_t* q, size_t n, int bits, uint8_t* out, size_t bytes) {
  const unsigned per = 8u / unsigned(bits);
  const unsigned mask = (1u << bits) - 1u;
  for (size_t k = size_t(blockIdx.x) * kThreads + threadIdx.x; k < bytes;
       k += size_t(gridDim.x) * kThreads) {
    unsigned b = 0;
    for (unsigned j = 0; j < per && k * per + j < n; ++j)
      b |= (q[k * per + j] & mask) << (j * bits);
    out[k] = uint8_t(b);
  }
}

// One thread per code, so the writes coalesce.
__global__ void unpack_kernel(const uint8_t* in, size_t n, int bits, uint8_t* q) {
  const unsigned per = 8u / unsigned(bits);
  const unsigned mask = (1u << bits) - 1u;
  for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += size_t(gridDim.x) * kThreads)
    q[i] = uint8_t((in[i / per] >> ((i % per) * bits)) & mask);
}

// Integer-only, like abs_max_tail: a NaN cannot slip through a float compare.
__global__ void all_finite_kernel(const float* x, size_t n, uint8_t* result) {
  uint32_t amax = 0;
  for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += size_t(gridDim.x) * kThreads) {
    const uint32_t a = kernels::float_bits(x[i]) & 0x7FFFFFFFu;
    amax = a > amax ? a : amax;
  }
  if (amax >= 0x7F800000u) *result = 0;  // every writer stores the same byte
}

// A handful of flags: one thread reads them all.
__global__ void not_all_flags_kernel(const uint8_t* flags, size_t count, uint8_t* out,
                                     size_t bytes) {
  uint8_t all = 1;
  for (size_t i = 0; i < count; ++i) all &= flags[i];
  out[0] = all != 0 ? 0 : 1;
  for (size_t i = 1; i < bytes; ++i) out[i] = 0;
}

__global__ void nan_unless_finite_kernel(const uint8_t* finite, QParams* params, size_t channels,
                                         size_t tail) {
  if (*finite != 0) return;
  uint8_t* codes = reinterpret_cast<uint8_t*>(params + channels);
  const size_t end = channels > tail ? channels : tail;
  for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < end;
       i += size_t(gridDim.x) * kThreads) {
    if (i < channels) params[i] = QParams{__uint_as_float(0x7FC00000u), 0.0f};
    if (i < tail) codes[i] = 0;
  }
}

bool valid_bits(int bits) {
  return bits == 8 || bits == 4 || bits == 2;
}

}  // namespace

cudaError_t dequantize_add_cuda(const uint8_t* q, size_t n, size_t channel, const QParams* params,
                                float* acc, cudaStream_t stream) {
  return launch_dequantize<true>(q, n, channel, params, acc, stream);
}

cudaError_t dequantize_into_cuda(const uint8_t* q, size_t n, size_t channel, const QParams* params,
                                 float* out, cudaStream_t stream) {
  return launch_dequantize<false>(q, n, channel, params, out, stream);
}

cudaError_t wide_means_cuda(const uint8_t* first, size_t stride, size_t count, size_t n,
                            size_t channel, size_t head, int bits, int world, float* out,
                            cudaStream_t stream) {
  if (!valid_bits(bits) || world < 1 || (count != 0 && first == nullptr))
    return cudaErrorInvalidValue;
  const Tiles t = tiles::make_tiles(n, channel);
  if (t.blocks == 0 || count == 0) return cudaSuccess;
  wide_means_kernel<<<tiles::grid_blocks(t), kThreads, 0, stream>>>(first, stride, count, t, head,
                                                                    bits, world, out);
  return cudaGetLastError();
}

cudaError_t pack_cuda(const uint8_t* q, size_t n, int bits, uint8_t* out, cudaStream_t stream) {
  if (!valid_bits(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (bits == 8) return cudaMemcpyAsync(out, q, n, cudaMemcpyDeviceToDevice, stream);
  const size_t bytes = packed_bytes(n, bits);
  pack_kernel<<<tiles::stride_blocks(bytes), kThreads, 0, stream>>>(q, n, bits, out, bytes);
  return cudaGetLastError();
}

cudaError_t unpack_cuda(const uint8_t* in, size_t n, int bits, uint8_t* q, cudaStream_t stream) {
  if (!valid_bits(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (bits == 8) return cudaMemcpyAsync(q, in, n, cudaMemcpyDeviceToDevice, stream);
  unpack_kernel<<<tiles::stride_blocks(n), kThreads, 0, stream>>>(in, n, bits, q);
  return cudaGetLastError();
}

cudaError_t all_finite_cuda(const float* x, size_t n, uint8_t* result, cudaStream_t stream) {
  if (result == nullptr) return cudaErrorInvalidValue;
  cudaError_t err = cudaMemsetAsync(result, 1, 1, stream);
  if (err != cudaSuccess || n == 0) return err;
  all_finite_kernel<<<tiles::stride_blocks(n), kThreads, 0, stream>>>(x, n, result);
  return cudaGetLastError();
}

cudaError_t not_all_flags_cuda(const uint8_t* flags, size_t count, uint8_t* out, size_t bytes,
                               cudaStream_t stream) {
  if (out == nullptr || bytes == 0 || (flags == nullptr && count != 0))
    return cudaErrorInvalidValue;
  not_all_flags_kernel<<<1, 1, 0, stream>>>(flags, count, out, bytes);
  return cudaGetLastError();
}

cudaError_t nan_unless_finite_cuda(const uint8_t* finite, QParams* params, size_t channels,
                                   size_t tail, cudaStream_t stream) {
  if (finite == nullptr || params == nullptr) return cudaErrorInvalidValue;
  const size_t end = channels > tail ? channels : tail;
  if (end == 0) return cudaSuccess;
  nan_unless_finite_kernel<<<tiles::stride_blocks(end), kThreads, 0, stream>>>(finite, params,
                                                                               channels, tail);
  return cudaGetLastError();
}

}  // namespace quantization
}  // namespace ddph
