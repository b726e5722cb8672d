// The CPU kernels of one instruction-set level, as a table the public entry
// points (cast.cpp, divide.cpp, reduce.cpp) pick from at run time. Internal
// to core/kernels.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <type_traits>  // loops.inc, included after this header

#include "core/kernels/isa.h"

namespace ddph {
namespace kernels {

enum ReduceSlot { kSlotSum = 0, kSlotMax = 1, kSlotMin = 2, kNumReduceSlots = 3 };
constexpr int kNumDTypes = 7;  // ddph::DType values, in enum order

struct CpuTable {
  void (*f32_to_f16)(const float* src, uint16_t* dst, size_t n);
  void (*f32_to_bf16)(const float* src, uint16_t* dst, size_t n);
  void (*f16_to_f32)(const uint16_t* src, float* dst, size_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, size_t n);
  // dst = round(float(round(src)) / w): cast first, then divide in the low
  // precision, as PyTorch's fp16_compress_hook does.
  void (*f32_to_f16_div)(const float* src, uint16_t* dst, size_t n, float w);
  void (*f32_to_bf16_div)(const float* src, uint16_t* dst, size_t n, float w);
  void (*div_f16)(uint16_t* data, size_t n, float w);
  void (*div_bf16)(uint16_t* data, size_t n, float w);
  void (*div_f32)(float* data, size_t n, float w);
  void (*div_f64)(double* data, size_t n, double w);
  void (*div_i32)(int32_t* data, size_t n, int32_t w);
  void (*div_i64)(int64_t* data, size_t n, int64_t w);
  void (*div_u8)(uint8_t* data, size_t n, uint8_t w);
  // [slot][dtype]: dst = a op b elementwise; dst may equal a or b.
  void (*reduce[kNumReduceSlots][kNumDTypes])(void* dst, const void* a, const void* b, size_t n);
};

const CpuTable& cpu_table_scalar();
// x86-64 only. Call only when isa_supported() reaches the level: the
// functions use its instructions.
const CpuTable& cpu_table_avx2();
const CpuTable& cpu_table_avx512();
const CpuTable& cpu_table_avx512bf16();

// The table for isa_active().
const CpuTable& cpu_table();

}  // namespace kernels
}  // namespace ddph
