// CPU array kernels of the quantization family: vectorized, and dispatched at
// run time on ddph::isa_active() (core/kernels/isa.h), so set_isa_limit() and
// DDPH_KERNEL_ISA cap them like the core kernels. Every level gives the same
// bits as the scalar formulas of quant_math.h.
//
// Channels are consecutive runs of `channel` elements; the last channel may
// be short and is treated as padded with zeros (PyTorch pads the bucket to
// whole channels before the observer; zeros change neither min(min, 0) nor
// max(max, 0)). Per-tensor is channel == n; channel == 0 also means n.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/quant/kernels/quant_math.h"

namespace ddph {
namespace quantization {

// ceil(n / channel), and 1 for n == 0 (one channel of parameters, eps and 0).
size_t num_channels(size_t n, size_t channel);

struct QuantizeArgs {
  const float* x;
  size_t n;
  size_t channel;
  int qmax;                   // 255, 15 or 3
  float* residual = nullptr;  // in/out, n elements, or nullptr (no error feedback)
  // Where the new residual goes instead, when not nullptr: `residual` is
  // then only read. Saves the caller a copy to keep the old one. It must not
  // overlap x or residual (unless it is residual: in place).
  float* residual_out = nullptr;
  bool stochastic = false;
  uint64_t seed = 0;
  uint64_t counter_base = 0;  // element i draws uniform01(seed, counter_base + i)
  QParams* params;            // out: num_channels(n, channel) entries
  uint8_t* q;                 // out: n codes, one per byte
};

// Fused: per channel, min/max -> QParams -> quantize (nearest or
// stochastic). With a residual (error feedback) the value quantized is
// x[i] + residual[i] (ef_value: saturated at +-FLT_MAX where that finite
// sum overflows), and afterwards residual[i] (or residual_out[i]) = that
// value - dequantize(q[i]) (ef_residual). Finite input always quantizes,
// and its codes dequantize to finite values (qparams_from_minmax). Returns
// false if any x[i] or residual[i] is NaN or +-Inf; q and params are then
// unspecified, and so is residual_out, but the residual is left unchanged:
// in place it is checked for the whole bucket before any is written (one
// more pass), out of place it is never written.
bool quantize_channels(const QuantizeArgs& a);

// acc[i] += dequantize(q[i], params[i / channel]): float32, one add per
// element, so summing ranks in rank order reproduces PyTorch's loop.
void dequantize_add(const uint8_t* q, size_t n, size_t channel, const QParams* params, float* acc);
// out[i] = dequantize(q[i], params[i / channel]).
void dequantize_into(const uint8_t* q, size_t n, size_t channel, const QParams* params, float* out);

// Bit packing for the wire. bits 8 is a copy; 4 packs two codes per byte
// (element 2k in the low nibble); 2 packs four (element 4k in the low bits).
// Codes must fit in `bits`; the padding bits of the last byte are zero.
size_t packed_bytes(size_t n, int bits);
void pack(const uint8_t* q, size_t n, int bits, uint8_t* out);
void unpack(const uint8_t* in, size_t n, int bits, uint8_t* q);

bool all_finite(const float* x, size_t n);

}  // namespace quantization
}  // namespace ddph
