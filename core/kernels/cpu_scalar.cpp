// The reference level: plain loops over scalar.h. Every SIMD level is tested
// bit for bit against this one.
#include "core/kernels/cpu_table.h"
#include "core/kernels/scalar.h"

namespace ddph {
namespace kernels {
namespace {

#include "core/kernels/loops.inc"

template <uint16_t (*Down)(float)>
void down_loop(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Down(src[i]);
}
template <float (*Up)(uint16_t)>
void up_loop(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Up(src[i]);
}
template <uint16_t (*Down)(float), float (*Up)(uint16_t)>
void down_div_loop(const float* src, uint16_t* dst, size_t n, float w) {
  for (size_t i = 0; i < n; ++i) dst[i] = Down(Up(Down(src[i])) / w);
}
template <uint16_t (*Down)(float), float (*Up)(uint16_t)>
void div_low_loop(uint16_t* data, size_t n, float w) {
  for (size_t i = 0; i < n; ++i) data[i] = Down(Up(data[i]) / w);
}
template <uint16_t (*Down)(float), float (*Up)(uint16_t), class Op>
void reduce_low_loop(void* dst, const void* a, const void* b, size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  const Op op{};
  for (size_t i = 0; i < n; ++i) d[i] = Down(op(Up(x[i]), Up(y[i])));
}

template <uint16_t (*Down)(float), float (*Up)(uint16_t)>
void fill_low_reduce(CpuTable& t, int dtype) {
  t.reduce[kSlotSum][dtype] = &reduce_low_loop<Down, Up, OpSum>;
  t.reduce[kSlotMax][dtype] = &reduce_low_loop<Down, Up, OpMax>;
  t.reduce[kSlotMin][dtype] = &reduce_low_loop<Down, Up, OpMin>;
}

CpuTable make_table() {
  CpuTable t{};
  fill_generic(t);
  t.f32_to_f16 = &down_loop<f32_to_f16_bits>;
  t.f32_to_bf16 = &down_loop<f32_to_bf16_bits>;
  t.f16_to_f32 = &up_loop<f16_bits_to_f32>;
  t.bf16_to_f32 = &up_loop<bf16_bits_to_f32>;
  t.f32_to_f16_div = &down_div_loop<f32_to_f16_bits, f16_bits_to_f32>;
  t.f32_to_bf16_div = &down_div_loop<f32_to_bf16_bits, bf16_bits_to_f32>;
  t.div_f16 = &div_low_loop<f32_to_f16_bits, f16_bits_to_f32>;
  t.div_bf16 = &div_low_loop<f32_to_bf16_bits, bf16_bits_to_f32>;
  fill_low_reduce<f32_to_f16_bits, f16_bits_to_f32>(t, 2);
  fill_low_reduce<f32_to_bf16_bits, bf16_bits_to_f32>(t, 3);
  return t;
}

}  // namespace

const CpuTable& cpu_table_scalar() {
  static const CpuTable table = make_table();
  return table;
}

const CpuTable& cpu_table() {
  const CpuTable* t = nullptr;
  switch (isa_active()) {
    case Isa::kAvx512Bf16:
      t = cpu_table_avx512bf16();
      break;
    case Isa::kAvx512:
      t = cpu_table_avx512();
      break;
    case Isa::kAvx2:
      t = cpu_table_avx2();
      break;
    case Isa::kScalar:
      break;
  }
  return t != nullptr ? *t : cpu_table_scalar();
}

}  // namespace kernels
}  // namespace ddph
