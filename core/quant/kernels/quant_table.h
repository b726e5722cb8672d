// The CPU kernels of one instruction-set level, as a table quant_cpu.cpp
// picks from at run time (the pattern of core/kernels/cpu_table.h). Internal.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/quant/kernels/quant_cpu.h"

namespace ddph {
namespace quantization {

struct QuantTable {
  bool (*quantize)(const QuantizeArgs& a);  // channel already resolved (> 0 unless n == 0)
  void (*dequantize)(const uint8_t* q, size_t n, size_t channel, const QParams* params, float* out,
                     bool add);
  void (*pack)(const uint8_t* q, size_t n, int bits, uint8_t* out);  // bits 4 or 2
  void (*unpack)(const uint8_t* in, size_t n, int bits, uint8_t* q);
  bool (*all_finite)(const float* x, size_t n);
};

const QuantTable& quant_table_scalar();
// x86-64 only; call only when isa_supported() reaches the level.
const QuantTable& quant_table_avx2();
const QuantTable& quant_table_avx512();

}  // namespace quantization
}  // namespace ddph
