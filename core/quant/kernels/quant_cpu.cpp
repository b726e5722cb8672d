// Public entry points: argument handling, and the choice of level from
// ddph::isa_active() (core/kernels/isa.h), so the core kernels' cap
// (set_isa_limit, DDPH_KERNEL_ISA) applies here too.
#include "core/quant/kernels/quant_cpu.h"

#include <cstring>

#include "core/kernels/isa.h"
#include "core/quant/kernels/quant_table.h"

namespace ddph {
namespace quantization {
namespace {

const QuantTable& table() {
#if defined(__x86_64__)
  // Nothing here needs AVX-512 BF16: that level uses the AVX-512 table.
  static const QuantTable& (*const kLevels[])() = {&quant_table_avx2, &quant_table_avx512};
  return active_table(quant_table_scalar(), kLevels);
#else
  return quant_table_scalar();
#endif
}

size_t resolve(size_t n, size_t channel) {
  return channel == 0 ? n : channel;
}

// pack or unpack: 8 bits is a copy, 4 and 2 bits the level's kernel.
void repack(void (*kernel)(const uint8_t*, size_t, int, uint8_t*), const uint8_t* in, size_t n,
            int bits, uint8_t* out) {
  if (n == 0) return;
  if (bits == 8)
    std::memcpy(out, in, n);
  else
    kernel(in, n, bits, out);
}

}  // namespace

size_t num_channels(size_t n, size_t channel) {
  channel = resolve(n, channel);
  return n == 0 ? 1 : (n + channel - 1) / channel;
}

bool quantize_channels(const QuantizeArgs& a) {
  if (a.n == 0) {
    a.params[0] = qparams_from_minmax(0.0f, 0.0f, a.qmax);
    return true;
  }
  QuantizeArgs r = a;
  r.channel = resolve(a.n, a.channel);
  return table().quantize(r);
}

void dequantize_add(const uint8_t* q, size_t n, size_t channel, const QParams* params, float* acc) {
  if (n != 0) table().dequantize(q, n, resolve(n, channel), params, acc, true);
}

void dequantize_into(const uint8_t* q, size_t n, size_t channel, const QParams* params,
                     float* out) {
  if (n != 0) table().dequantize(q, n, resolve(n, channel), params, out, false);
}

size_t packed_bytes(size_t n, int bits) {
  const size_t per = bits == 2 ? 4 : (bits == 4 ? 2 : 1);
  return (n + per - 1) / per;
}

void pack(const uint8_t* q, size_t n, int bits, uint8_t* out) {
  repack(table().pack, q, n, bits, out);
}

void unpack(const uint8_t* in, size_t n, int bits, uint8_t* q) {
  repack(table().unpack, in, n, bits, q);
}

bool all_finite(const float* x, size_t n) {
  return n == 0 || table().all_finite(x, n);
}

}  // namespace quantization
}  // namespace ddph
