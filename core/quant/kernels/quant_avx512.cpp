// The AVX-512 F/BW/VL level: 16 lanes. The kernels are quant_simd.inc's over
// these traits, the operation sequence of the AVX2 level and quant_math.h
// (vdivps, vrndscaleps to nearest-even or down, vaddps/vmaxps/vminps,
// vcvttps2dq), with vpmovdb storing the codes. Pack/unpack reuse the AVX2
// shuffles: they are memory-bound.

#include "core/kernels/prefetch.h"
#include "core/kernels/simd_target.h"
#include "core/quant/kernels/quant_math.h"
#include "core/quant/kernels/quant_table.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace ddph {
namespace quantization {
void pack_avx2(const uint8_t* q, size_t n, int bits, uint8_t* out);
void unpack_avx2(const uint8_t* in, size_t n, int bits, uint8_t* q);
}  // namespace quantization
}  // namespace ddph

DDPH_TARGET_BEGIN("avx2,f16c,avx512f,avx512bw,avx512vl")

namespace ddph {
namespace quantization {
namespace {

#include "core/kernels/simd_avx512.inc"
#include "core/quant/kernels/quant_loops.inc"

struct Avx512 : FloatsAvx512 {
  using I = __m512i;

  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F round_nearest(F v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F round_down(F v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }

  static I iset1(uint32_t v) { return _mm512_set1_epi32(int(v)); }
  static I izero() { return _mm512_setzero_si512(); }
  static I iadd(I a, I b) { return _mm512_add_epi32(a, b); }
  static I imax(I a, I b) { return _mm512_max_epu32(a, b); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  template <int k>
  static I srli(I a) {
    return _mm512_srli_epi32(a, k);
  }
  static I bits(F v) { return _mm512_castps_si512(v); }
  static F to_float(I v) { return _mm512_cvtepi32_ps(v); }
  static I to_int(F v) { return _mm512_cvttps_epi32(v); }
  static I iota() {
    return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
  static I carry_into(uint32_t hi, I lo, I base) {
    const I h = _mm512_set1_epi32(int(hi));
    return _mm512_mask_add_epi32(h, _mm512_cmplt_epu32_mask(lo, base), h, _mm512_set1_epi32(1));
  }

  static float reduce_min(F v) { return _mm512_reduce_min_ps(v); }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }
  static uint32_t reduce_imax(I v) { return _mm512_reduce_max_epu32(v); }

  static F load_codes(const uint8_t* q) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
  }
  static constexpr size_t kCodeGroup = 1;
  static void store_codes(uint8_t* q, I c) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(c));
  }
  static void store_code_group(uint8_t* q, const I (&c)[kCodeGroup]) { store_codes(q, c[0]); }
  static constexpr bool kStreams = true;
  static void stream(float* p, F v) { _mm512_stream_ps(p, v); }
  static void fence() { _mm_sfence(); }

  static void pack(const uint8_t* q, size_t n, int bits, uint8_t* out) {
    pack_avx2(q, n, bits, out);
  }
  static void unpack(const uint8_t* in, size_t n, int bits, uint8_t* q) {
    unpack_avx2(in, n, bits, q);
  }
};

#include "core/quant/kernels/quant_simd.inc"

}  // namespace

const QuantTable& quant_table_avx512() {
  return simd_quant_table<Avx512>();
}

}  // namespace quantization
}  // namespace ddph

DDPH_TARGET_END
#endif
