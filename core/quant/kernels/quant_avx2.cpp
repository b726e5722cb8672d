// The AVX2 level: 8 lanes. The kernels are quant_simd.inc's over these
// traits: vdivps (true division, as torch), vroundps with
// _MM_FROUND_TO_NEAREST_INT (half to even) or _MM_FROUND_TO_NEG_INF
// (stochastic), vaddps/vmaxps/vminps, vcvttps2dq and a pack to bytes: the
// same IEEE operations, in the same order, as quant_math.h, so the codes
// match the scalar level bit for bit.

#include "core/kernels/prefetch.h"
#include "core/kernels/simd_target.h"
#include "core/quant/kernels/quant_math.h"
#include "core/quant/kernels/quant_table.h"

#if defined(__x86_64__)
#include <immintrin.h>

DDPH_TARGET_BEGIN("avx2,f16c")

namespace ddph {
namespace quantization {
namespace {

#include "core/kernels/simd_avx2.inc"
#include "core/quant/kernels/quant_loops.inc"

struct Avx2 : FloatsAvx2 {
  using I = __m256i;

  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F round_nearest(F v) {
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F round_down(F v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }

  static I iset1(uint32_t v) { return _mm256_set1_epi32(int(v)); }
  static I izero() { return _mm256_setzero_si256(); }
  static I iadd(I a, I b) { return _mm256_add_epi32(a, b); }
  static I imax(I a, I b) { return _mm256_max_epi32(a, b); }
  static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  template <int k>
  static I srli(I a) {
    return _mm256_srli_epi32(a, k);
  }
  static I bits(F v) { return _mm256_castps_si256(v); }
  static F to_float(I v) { return _mm256_cvtepi32_ps(v); }
  static I to_int(F v) { return _mm256_cvttps_epi32(v); }
  static I iota() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
  static I carry_into(uint32_t hi, I lo, I base) {
    // -1 in the lanes that did not wrap (lo >= base), so those keep hi.
    const I no_carry = _mm256_cmpeq_epi32(_mm256_max_epu32(lo, base), lo);
    return _mm256_add_epi32(_mm256_set1_epi32(int(hi + 1u)), no_carry);
  }

  static float reduce_min(F v) {
    return reduce(v, [](float a, float b) { return b < a ? b : a; });
  }
  static float reduce_max(F v) {
    return reduce(v, [](float a, float b) { return b > a ? b : a; });
  }
  static uint32_t reduce_imax(I v) {
    alignas(32) uint32_t lanes[W];
    _mm256_store_si256(reinterpret_cast<I*>(lanes), v);
    uint32_t m = lanes[0];
    for (size_t k = 1; k < W; ++k) m = lanes[k] > m ? lanes[k] : m;
    return m;
  }
  template <class Pick>
  static float reduce(F v, Pick pick) {
    alignas(32) float lanes[W];
    _mm256_store_ps(lanes, v);
    float m = lanes[0];
    for (size_t k = 1; k < W; ++k) m = pick(m, lanes[k]);
    return m;
  }

  static F load_codes(const uint8_t* q) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  }
  // Four vectors of codes per store: lane-wise packs interleave the 128-bit
  // halves, and one permute restores the order.
  static constexpr size_t kCodeGroup = 4;
  static void store_code_group(uint8_t* q, const I (&c)[kCodeGroup]) {
    const I ab = _mm256_packus_epi32(c[0], c[1]);
    const I cd = _mm256_packus_epi32(c[2], c[3]);
    const I order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const I bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
    _mm256_storeu_si256(reinterpret_cast<I*>(q), bytes);
  }
  static void store_codes(uint8_t* q, I c) {
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm_packus_epi16(w, w));
  }
  // No streaming stores at this level: 32-byte ones took 5.5 ms to decode
  // 25 MB here, against 1.0 ms with normal stores.
  static constexpr bool kStreams = false;

  // 4 bits: 32 codes -> 16 bytes with vpmaddubsw (q[2k] + 16 q[2k+1]);
  // 2 bits: 64 codes -> 16 bytes, then vpmaddwd joins the nibbles.
  static void pack(const uint8_t* q, size_t n, int bits, uint8_t* out) {
    size_t i = 0;
    if (bits == 4) {
      const I mask = _mm256_set1_epi8(0x0F), mul = _mm256_set1_epi16(0x1001);
      for (; i + 32 <= n; i += 32) {
        const I v = _mm256_and_si256(_mm256_loadu_si256((const I*)(q + i)), mask);
        const I m = _mm256_maddubs_epi16(v, mul);
        const __m128i b =
            _mm_packus_epi16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i / 2), b);
      }
    } else {
      const I mask = _mm256_set1_epi8(0x03), mul = _mm256_set1_epi16(0x0401);
      const I mul2 = _mm256_set1_epi32(0x00100001);
      for (; i + 64 <= n; i += 64) {
        I w[2];
        for (int k = 0; k < 2; ++k) {
          const I v = _mm256_and_si256(_mm256_loadu_si256((const I*)(q + i + 32 * k)), mask);
          w[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(v, mul), mul2);
        }
        const I ab = _mm256_permute4x64_epi64(_mm256_packus_epi32(w[0], w[1]), 0xD8);
        const __m128i b =
            _mm_packus_epi16(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i / 4), b);
      }
    }
    pack_tail(q + i, n - i, bits, out + i / size_t(8 / bits));
  }

  static void unpack(const uint8_t* in, size_t n, int bits, uint8_t* q) {
    size_t i = 0;
    if (bits == 4) {
      const __m128i mask = _mm_set1_epi8(0x0F);
      for (; i + 32 <= n; i += 32) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i / 2));
        const __m128i lo = _mm_and_si128(b, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm_unpacklo_epi8(lo, hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i + 16), _mm_unpackhi_epi8(lo, hi));
      }
    } else {
      const __m128i mask = _mm_set1_epi8(0x03);
      for (; i + 64 <= n; i += 64) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i / 4));
        const __m128i c0 = _mm_and_si128(b, mask);
        const __m128i c1 = _mm_and_si128(_mm_srli_epi16(b, 2), mask);
        const __m128i c2 = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
        const __m128i c3 = _mm_and_si128(_mm_srli_epi16(b, 6), mask);
        const __m128i e01 = _mm_unpacklo_epi8(c0, c1), o01 = _mm_unpackhi_epi8(c0, c1);
        const __m128i e23 = _mm_unpacklo_epi8(c2, c3), o23 = _mm_unpackhi_epi8(c2, c3);
        __m128i* d = reinterpret_cast<__m128i*>(q + i);
        _mm_storeu_si128(d + 0, _mm_unpacklo_epi16(e01, e23));
        _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(e01, e23));
        _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(o01, o23));
        _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(o01, o23));
      }
    }
    unpack_tail(in + i / size_t(8 / bits), n - i, bits, q + i);
  }
};

#include "core/quant/kernels/quant_simd.inc"

}  // namespace

// The AVX-512 level reuses these: they are memory-bound shuffles.
void pack_avx2(const uint8_t* q, size_t n, int bits, uint8_t* out) {
  Avx2::pack(q, n, bits, out);
}
void unpack_avx2(const uint8_t* in, size_t n, int bits, uint8_t* q) {
  Avx2::unpack(in, n, bits, q);
}

const QuantTable& quant_table_avx2() {
  return simd_quant_table<Avx2>();
}

}  // namespace quantization
}  // namespace ddph

DDPH_TARGET_END
#endif
