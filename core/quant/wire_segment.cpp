#include "core/quant/wire_segment.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/divide.h"
#include "core/quant/kernels/quant_cpu.h"

namespace ddph {
namespace quantization {
namespace {

size_t round_up8(size_t n) {
  return (n + 7) & ~size_t(7);
}

// Copies the params out, since the wire buffer gives no alignment promise
// to a reader of floats (and memcpy keeps aliasing rules).
const QParams* read_params(const uint8_t* in, const Segment& s, CodecScratch& scratch) {
  QParams* p = scratch.params;
  std::memcpy(p, in, params_bytes(s));
  return p;
}

// The kernels' rule: channel 0 means one channel over the whole segment.
size_t channel_length(const Segment& s) {
  return s.channel == 0 ? s.n : s.channel;
}

// The parts of an encoding around its codes: the params in front, and zeros
// after the packed codes, so no stale bytes go on the wire.
void finish_encoding(const Segment& s, int bits, const QParams* params, uint8_t* out) {
  const size_t head = params_bytes(s);
  std::memcpy(out, params, head);
  const size_t used = head + packed_bytes(s.n, bits);
  std::memset(out + used, 0, encoded_bytes(s, bits) - used);
}

const uint8_t* read_codes(const uint8_t* in, const Segment& s, int bits, CodecScratch& scratch) {
  const uint8_t* packed = in + params_bytes(s);
  if (bits == 8) return packed;
  uint8_t* q = scratch.codes;
  unpack(packed, s.n, bits, q);
  return q;
}

}  // namespace

size_t params_bytes(const Segment& s) {
  return segment_channels(s) * sizeof(QParams);
}

size_t segment_channels(const Segment& s) {
  return s.n == 0 ? 0 : num_channels(s.n, s.channel);
}

size_t encoded_bytes(const Segment& s, int bits) {
  if (s.n == 0) return 0;
  return round_up8(params_bytes(s) + packed_bytes(s.n, bits));
}

QuantizeArgs quantize_args(const float* x, const Segment& s, const EncodeArgs& args) {
  QuantizeArgs a;
  a.x = x;
  a.n = s.n;
  a.channel = s.channel;
  a.qmax = (1 << args.bits) - 1;
  a.residual = args.residual;
  if (args.residual != nullptr && args.residual_in != nullptr) {
    // The kernel only reads `residual` when given residual_out.
    a.residual = const_cast<float*>(args.residual_in);
    a.residual_out = args.residual;
  }
  a.stochastic = args.stochastic;
  a.seed = args.seed;
  a.counter_base = args.counter_base;
  return a;
}

bool encode_segment(const float* x, const Segment& s, const EncodeArgs& args, uint8_t* out,
                    CodecScratch& scratch) {
  if (s.n == 0) return true;
  const size_t head = params_bytes(s);
  QuantizeArgs a = quantize_args(x, s, args);
  a.params = scratch.params;
  // 8-bit codes are their own wire format: quantize straight into place.
  a.q = args.bits == 8 ? out + head : scratch.codes;
  const bool finite = quantize_channels(a);
  if (args.bits != 8) pack(a.q, s.n, args.bits, out + head);
  finish_encoding(s, args.bits, a.params, out);
  return finite;
}

void decode_add(const uint8_t* in, const Segment& s, int bits, float* acc, CodecScratch& scratch) {
  if (s.n == 0) return;
  const QParams* p = read_params(in, s, scratch);
  dequantize_add(read_codes(in, s, bits, scratch), s.n, s.channel, p, acc);
}

void decode_into(const uint8_t* in, const Segment& s, int bits, float* out, CodecScratch& scratch) {
  if (s.n == 0) return;
  const QParams* p = read_params(in, s, scratch);
  dequantize_into(read_codes(in, s, bits, scratch), s.n, s.channel, p, out);
}

namespace {

// Whether decode_mean can work a channel at a time: bit-packed channels
// must start on a byte.
bool channelwise(size_t ch, int bits) {
  return (ch * size_t(bits)) % 8 == 0;
}

QParams params_of(const uint8_t* in, size_t c) {
  QParams p;
  std::memcpy(&p, in + c * sizeof p, sizeof p);  // the wire promises no alignment
  return p;
}

// Whether channel c's mean over the encodings must be summed in double
// (quant_math.h's mean_wide): the float32 sum of its dequantized values
// could overflow.
bool wide_channel(const uint8_t* const* ins, size_t count, size_t c, int bits) {
  const int qmax = (1 << bits) - 1;
  double bound = 0;
  for (size_t k = 0; k < count; ++k)
    bound = qm_dadd(bound, dequantized_bound(params_of(ins[k], c), qmax));
  return float_sum_may_overflow(bound, count);
}

// Channel c's mean (elements off .. off + len) summed in double, in rank
// order, element by element straight from the packed codes: a rare path.
void wide_mean_of_channel(const uint8_t* const* ins, size_t count, size_t head, size_t c,
                          size_t off, size_t len, int bits, int world, float* out) {
  std::vector<QParams> p(count);
  for (size_t k = 0; k < count; ++k) p[k] = params_of(ins[k], c);
  for (size_t i = 0; i < len; ++i) {
    double sum = 0;
    for (size_t k = 0; k < count; ++k)
      sum = qm_dadd(sum, dequantize_wide(packed_code(ins[k] + head, off + i, bits), p[k]));
    out[i] = mean_wide(sum, world);
  }
}

// decode_mean's sum for channel c (elements off .. off + len of the
// segment, whose params take `head` bytes) into sum.
void mean_of_channel(const uint8_t* const* ins, size_t count, size_t head, size_t c, size_t off,
                     size_t len, int bits, int world, float* sum, CodecScratch& scratch) {
  if (wide_channel(ins, count, c, bits))
    return wide_mean_of_channel(ins, count, head, c, off, len, bits, world, sum);
  std::memset(sum, 0, len * sizeof(float));
  for (size_t k = 0; k < count; ++k) {
    const QParams p = params_of(ins[k], c);
    const uint8_t* codes = ins[k] + head + off * size_t(bits) / 8;
    if (bits != 8) {
      unpack(codes, len, bits, scratch.codes);
      codes = scratch.codes;
    }
    dequantize_add(codes, len, len, &p, sum);
  }
  divide_inplace(DType::F32, sum, len, world);
}

// encode_mean's groups of channels: their mean (16 KiB) stays in L1 until
// it is quantized.
constexpr size_t kMeanGroupFloats = 4096;

}  // namespace

void decode_mean(const uint8_t* const* ins, size_t count, const Segment& s, int bits, int world,
                 float* out, CodecScratch& scratch) {
  if (s.n == 0) return;
  const size_t ch = channel_length(s);
  const size_t head = params_bytes(s);
  if (!channelwise(ch, bits)) {
    std::memset(out, 0, s.n * sizeof(float));
    for (size_t k = 0; k < count; ++k) decode_add(ins[k], s, bits, out, scratch);
    divide_inplace(DType::F32, out, s.n, world);
    for (size_t c = 0, off = 0; off < s.n; ++c, off += ch)
      if (wide_channel(ins, count, c, bits))
        wide_mean_of_channel(ins, count, head, c, off, std::min(ch, s.n - off), bits, world,
                             out + off);
    return;
  }
  for (size_t c = 0, off = 0; off < s.n; ++c, off += ch)
    mean_of_channel(ins, count, head, c, off, std::min(ch, s.n - off), bits, world, out + off,
                    scratch);
}

bool encode_mean(const uint8_t* const* ins, size_t count, const Segment& s, int world,
                 const EncodeArgs& args, uint8_t* out, float* acc, CodecScratch& scratch) {
  if (s.n == 0) return true;
  const size_t ch = channel_length(s);
  if (!channelwise(ch, args.bits) || ch > kMeanGroupFloats || args.residual != nullptr) {
    decode_mean(ins, count, s, args.bits, world, acc, scratch);
    return encode_segment(acc, s, args, out, scratch);
  }
  const size_t head = params_bytes(s), group = kMeanGroupFloats / ch * ch;
  alignas(64) float mean[kMeanGroupFloats];
  uint8_t codes[kMeanGroupFloats];  // bits < 8: a group's codes before packing
  for (size_t g = 0; g < s.n; g += group) {
    const size_t len = std::min(group, s.n - g);
    for (size_t off = g; off < g + len; off += ch)
      mean_of_channel(ins, count, head, off / ch, off, std::min(ch, s.n - off), args.bits, world,
                      mean + (off - g), scratch);
    QuantizeArgs a = quantize_args(mean, Segment{len, ch}, args);
    a.counter_base += g;
    a.params = scratch.params + g / ch;
    // A group starts on a byte (channelwise), so it packs in place.
    uint8_t* packed = out + head + g * size_t(args.bits) / 8;
    a.q = args.bits == 8 ? packed : codes;
    if (!quantize_channels(a)) return false;
    if (args.bits != 8) pack(codes, len, args.bits, packed);
  }
  finish_encoding(s, args.bits, scratch.params, out);
  return true;
}

void encode_nan(const Segment& s, int bits, uint8_t* out) {
  if (s.n == 0) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const QParams p{nan, 0.0f};  // scale NaN: every value decodes to NaN
  for (size_t c = 0; c < segment_channels(s); ++c) std::memcpy(out + c * sizeof p, &p, sizeof p);
  std::memset(out + params_bytes(s), 0, encoded_bytes(s, bits) - params_bytes(s));
}

}  // namespace quantization
}  // namespace ddph
