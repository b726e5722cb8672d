// CUDA array kernels of the quantization family: the GPU twins of
// quant_cpu.h, built from the same per-element math (quant_math.h), so every
// function gives the same bits as its CPU twin on the same input.
//
// Arguments mean what they mean in quant_cpu.h, except that every pointer is
// device memory (QuantizeArgs included) and each call takes the stream to
// enqueue on. Nothing here synchronizes: a call only enqueues work (kernels,
// cudaMemsetAsync, cudaMemcpyAsync) and returns. It allocates nothing either,
// so it may run on a hook's hot path. The CPU functions' bool results become
// device flags, one byte each (1 = true, 0 = false), readable once the
// stream reaches them.
//
// Each call returns the error of enqueuing (cudaSuccess, or e.g.
// cudaErrorNoDevice / cudaErrorInvalidValue); faults inside the kernels
// surface later on the stream, as with any CUDA call.
//
// Performance note: one block works on one channel (or a 2048-element piece
// of it), so channels far shorter than a block (< 128 elements) leave most
// threads idle; the hooks use 512 or the whole tensor.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "core/quant/kernels/quant_cpu.h"  // QuantizeArgs, QParams, packed_bytes

namespace ddph {
namespace quantization {

// Fused per-channel quantize: min/max of each channel -> QParams -> codes,
// with optional error feedback, as quantize_channels(). *all_finite (device)
// becomes 1 if every value quantized is finite, else 0; when it is 0 the
// residual is left unchanged and q and params are unspecified, as on the CPU.
// a.params is also the scratch of the min/max pass: no other memory is used.
cudaError_t quantize_channels_cuda(const QuantizeArgs& a, uint8_t* all_finite, cudaStream_t stream);

// acc[i] += dequantize(q[i], params[i / channel]), one float add per element.
cudaError_t dequantize_add_cuda(const uint8_t* q, size_t n, size_t channel, const QParams* params,
                                float* acc, cudaStream_t stream);
// out[i] = dequantize(q[i], params[i / channel]).
cudaError_t dequantize_into_cuda(const uint8_t* q, size_t n, size_t channel, const QParams* params,
                                 float* out, cudaStream_t stream);

// The mean's fix for wide channels (wire_segment.h's decode_mean): `count`
// encodings of n values in channels of `channel` lie `stride` bytes apart
// from first, each its params (8-byte aligned) then, `head` bytes in, its
// codes packed at `bits`. For every channel whose float32 sum could
// overflow (float_sum_may_overflow), out gets mean_wide of the double sum
// in rank order; other channels keep the float32 mean already in out.
cudaError_t wide_means_cuda(const uint8_t* first, size_t stride, size_t count, size_t n,
                            size_t channel, size_t head, int bits, int world, float* out,
                            cudaStream_t stream);

// Bit packing for the wire, the layout of pack()/unpack(): out holds
// packed_bytes(n, bits) bytes. bits 8 is a device-to-device copy.
cudaError_t pack_cuda(const uint8_t* q, size_t n, int bits, uint8_t* out, cudaStream_t stream);
cudaError_t unpack_cuda(const uint8_t* in, size_t n, int bits, uint8_t* q, cudaStream_t stream);

// *result (device) becomes 1 if no x[i] is NaN or +-Inf, else 0.
cudaError_t all_finite_cuda(const float* x, size_t n, uint8_t* result, cudaStream_t stream);

// For the hooks, which must turn device flags into wire bytes without a host
// round trip:
// out[0] = 0 if all `count` flags (the all_finite bytes above) are 1, else
// 1; out[1, bytes) = 0. The layout of the hooks' rank header.
cudaError_t not_all_flags_cuda(const uint8_t* flags, size_t count, uint8_t* out, size_t bytes,
                               cudaStream_t stream);
// When *finite is 0: every one of `channels` params becomes {quiet NaN
// 0x7FC00000, 0} and the `tail` bytes after the params become 0 (what the
// hooks send for a mean that overflowed); when it is 1, nothing changes.
cudaError_t nan_unless_finite_cuda(const uint8_t* finite, QParams* params, size_t channels,
                                   size_t tail, cudaStream_t stream);

}  // namespace quantization
}  // namespace ddph
