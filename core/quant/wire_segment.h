// One contiguous run of a bucket as it travels: the scale and zero point of
// each of its channels, then its codes, bit-packed for bits < 8.
//
//   [QParams x num_channels][packed codes][zero padding to 8 bytes]
//
// QParams travel as the two native floats: every rank of a job runs the same
// build on the same architecture, and the bytes never leave the job.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/quant/kernels/quant_cpu.h"  // QuantizeArgs
#include "core/quant/kernels/quant_math.h"

namespace ddph {
namespace quantization {

struct Segment {
  size_t n = 0;        // elements
  size_t channel = 0;  // elements per channel (the last one may be shorter)
};

size_t segment_channels(const Segment& s);
// Bytes of the params at the front of an encoded segment: a multiple of 8,
// so the codes after them, and the params of segments laid side by side,
// keep the alignment of floats.
size_t params_bytes(const Segment& s);
// Bytes of the encoded segment, a multiple of 8 so that segments can be laid
// side by side; 0 for an empty segment.
size_t encoded_bytes(const Segment& s, int bits);

// How the first quantization of a rank's own data rounds and remembers.
struct EncodeArgs {
  int bits = 8;
  bool stochastic = false;
  uint64_t seed = 0;
  uint64_t counter_base = 0;  // counter of element 0 of the segment
  float* residual = nullptr;  // error feedback over the segment, or NULL
  // With residual: the old residual to read, when not NULL, and `residual`
  // only receives the new one (NULL: residual is updated in place).
  const float* residual_in = nullptr;
};

// The scratch the codec functions share, sized by their caller (codec.h):
// params for the widest segment's channels, codes for its elements.
struct CodecScratch {
  QParams* params = nullptr;
  uint8_t* codes = nullptr;
};

// The quantize kernel's arguments for x as segment s (host and GPU alike);
// params and codes are the caller's to set.
QuantizeArgs quantize_args(const float* x, const Segment& s, const EncodeArgs& args);

// Quantizes x (s.n values) into out (encoded_bytes(s, bits) bytes). Returns
// false when x holds NaN or Inf; the bytes are then meaningless.
bool encode_segment(const float* x, const Segment& s, const EncodeArgs& args, uint8_t* out,
                    CodecScratch& scratch);
// acc[i] += dequantized value i of the encoded segment `in`.
void decode_add(const uint8_t* in, const Segment& s, int bits, float* acc, CodecScratch& scratch);
// out[i] = dequantized value i of the encoded segment `in`.
void decode_into(const uint8_t* in, const Segment& s, int bits, float* out, CodecScratch& scratch);
// The mean of `count` encodings of segment s: out[i] = (0 + value i of
// ins[0] + ... + value i of ins[count - 1], summed in that order) / world.
// The same bits as zeroing out, decode_add of each encoding in turn, then
// divide_inplace (core/kernels/divide.h), but a channel at a time while its
// sum is in L1, where whole-segment passes ran the sum through the caches
// count + 2 times (at W = 4 a third less CPU). Falls back to those passes
// when bit-packed channels do not start on a byte. A channel whose float32
// sum could overflow (its values' bounds add up to about FLT_MAX) is summed
// in double instead and its mean saturates at +-FLT_MAX (quant_math.h's
// mean_wide): finite encodings always give a finite mean.
void decode_mean(const uint8_t* const* ins, size_t count, const Segment& s, int bits, int world,
                 float* out, CodecScratch& scratch);
// encode_segment of decode_mean's result, the same bytes, into out: false
// when the mean is not finite, which finite encodings never give (the
// bytes are then meaningless). A group of
// channels at a time is summed and quantized while it is in L1; where that
// cannot be done (channels that are not byte-aligned or are longer than a
// group, or error feedback, whose residual must stay as it was when the
// mean is rejected) the mean goes through acc (s.n floats).
bool encode_mean(const uint8_t* const* ins, size_t count, const Segment& s, int world,
                 const EncodeArgs& args, uint8_t* out, float* acc, CodecScratch& scratch);
// Makes `out` decode to NaN everywhere: what an owner sends for a chunk whose
// mean is not finite. Finite contributions cannot give one (decode_mean
// saturates), so this is a guard: a bug shows as NaN on every rank, never
// as codes under a scale computed from Inf.
void encode_nan(const Segment& s, int bits, uint8_t* out);

}  // namespace quantization
}  // namespace ddph
