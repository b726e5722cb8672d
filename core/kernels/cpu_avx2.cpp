// The AVX2 + F16C level. Half casts use vcvtps2ph/vcvtph2ps; bfloat16 uses
// the integer round-to-nearest-even trick (no AVX2 instruction does it).
// Checked with objdump: the loops compile to vcvtps2ph/vcvtph2ps on ymm
// registers, and loops.inc's loops to vaddps/vdivps/vpaddd on ymm.
#include "core/kernels/cpu_table.h"
#include "core/kernels/scalar.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace ddph {
namespace kernels {
namespace {

#include "core/kernels/loops.inc"

struct VecAvx2 {
  static constexpr size_t W = 8;
  using F = __m256;
  using H = __m128i;
  static F load_f(const float* p) { return _mm256_loadu_ps(p); }
  static void store_f(float* p, F v) { _mm256_storeu_ps(p, v); }
  static H load_h(const uint16_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  static void store_h(uint16_t* p, H v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
  static H to_h(F v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F from_h(H h) { return _mm256_cvtph_ps(h); }
  static H to_b(F v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb);
    r = _mm256_srli_epi32(r, 16);
    const __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7F800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, quiet, nan);
    // Every lane holds a value <= 0xFFFF, so the saturating pack is exact.
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  static F from_b(H h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static F set1(float w) { return _mm256_set1_ps(w); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  // NaN first, else a if a > b, else b: OpMax of scalar.h.
  static F max(F a, F b) { return pick(a, b, _mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
  static F min(F a, F b) { return pick(a, b, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
  static F pick(F a, F b, F a_wins) {
    F r = _mm256_blendv_ps(b, a, a_wins);
    r = _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
    return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};

#include "core/kernels/simd_lowp.inc"

}  // namespace
}  // namespace kernels
}  // namespace ddph

#pragma GCC pop_options

namespace ddph {
namespace kernels {

// Outside the target region: only the table's functions need AVX2.
const CpuTable& cpu_table_avx2() {
  static const CpuTable table = make_simd_table<VecAvx2>();
  return table;
}

}  // namespace kernels
}  // namespace ddph

#endif
