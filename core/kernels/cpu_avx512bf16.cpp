// The AVX-512 level with BF16: float -> bfloat16 uses vcvtneps2bf16. That
// instruction treats denormal inputs as zero, unlike scalar.h (and PyTorch),
// so a vector holding a float denormal takes the integer path instead; such
// vectors are rare in gradients and the check costs one compare per vector.
#include "core/kernels/cpu_table.h"
#include "core/kernels/scalar.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c,avx512f,avx512bw,avx512vl,avx512bf16")

namespace ddph {
namespace kernels {
namespace {

#include "core/kernels/loops.inc"
#include "core/kernels/simd_avx512.inc"

struct VecAvx512Bf16 : VecAvx512 {
  static H to_b(F v) {
    const __m512i ax = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 denormal =
        _mm512_cmplt_epi32_mask(ax, _mm512_set1_epi32(0x00800000)) & _mm512_test_epi32_mask(ax, ax);
    if (denormal) return VecAvx512::to_b(v);
    return reinterpret_cast<H>(_mm512_cvtneps_pbh(v));
  }
};

#include "core/kernels/simd_lowp.inc"

}  // namespace

const CpuTable& cpu_table_avx512bf16() {
  return simd_table<VecAvx512Bf16>();
}

}  // namespace kernels
}  // namespace ddph

#pragma GCC pop_options
#endif
