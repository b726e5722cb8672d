// The reference level: simd_lowp.inc's kernels over one lane of scalar.h,
// plain loops the compiler may still vectorize with SSE2. Every SIMD level is
// tested bit for bit against this one. Also the run-time choice of level.
#include "core/kernels/cpu_table.h"
#include "core/kernels/scalar.h"

namespace ddph {
namespace kernels {
namespace {

#include "core/kernels/loops.inc"

// The vector traits of simd_lowp.inc, one float wide.
struct VecScalar {
  static constexpr size_t W = 1;
  using F = float;
  using H = uint16_t;
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static H load_h(const uint16_t* p) { return *p; }
  static void store_h(uint16_t* p, H v) { *p = v; }
  static H to_h(F v) { return f32_to_f16_bits(v); }
  static F from_h(H h) { return f16_bits_to_f32(h); }
  static H to_b(F v) { return f32_to_bf16_bits(v); }
  static F from_b(H h) { return bf16_bits_to_f32(h); }
  static F set1(float w) { return w; }
  static F max(F a, F b) { return OpMax{}(a, b); }
  static F min(F a, F b) { return OpMin{}(a, b); }
};

#include "core/kernels/simd_lowp.inc"

}  // namespace

const CpuTable& cpu_table_scalar() {
  return simd_table<VecScalar>();
}

const CpuTable& cpu_table() {
#if defined(__x86_64__)
  static const CpuTable& (*const kLevels[])() = {&cpu_table_avx2, &cpu_table_avx512,
                                                 &cpu_table_avx512bf16};
  return active_table(cpu_table_scalar(), kLevels);
#else
  return cpu_table_scalar();
#endif
}

}  // namespace kernels
}  // namespace ddph
