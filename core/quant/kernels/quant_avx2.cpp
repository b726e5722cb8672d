// The AVX2 level: 8 lanes. The quantize body is vdivps (true division, as
// torch), vroundps with _MM_FROUND_TO_NEAREST_INT (half to even) or
// _MM_FROUND_TO_NEG_INF (stochastic), vaddps/vmaxps/vminps, vcvttps2dq and
// a pack to bytes: the same IEEE operations, in the same order, as
// quant_math.h, so the codes match the scalar level bit for bit.

#include "core/kernels/prefetch.h"
#include "core/quant/kernels/quant_math.h"
#include "core/quant/kernels/quant_table.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace ddph {
namespace quantization {
namespace {

#include "core/quant/kernels/quant_loops.inc"

struct Avx2 {
  static constexpr size_t W = 8;
  using F = __m256;
  using I = __m256i;

  template <bool kEf>
  static F value(const float* x, const float* r) {
    const F v = _mm256_loadu_ps(x);
    return kEf ? _mm256_add_ps(v, _mm256_loadu_ps(r)) : v;
  }

  static I mix32(I x) {
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7FEB352D));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(int(0x846CA68Bu)));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  }

  // uniform01 for counters c .. c+7, as bits_to_unit(random_bits(key, .)).
  static F uniform(RngKey key, uint64_t c) {
    const I base = _mm256_set1_epi32(int(uint32_t(c)));
    const I lo = _mm256_add_epi32(base, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    // High word: +1 in the lanes where the low word wrapped (lo < base).
    const I no_carry = _mm256_cmpeq_epi32(_mm256_max_epu32(lo, base), lo);
    const I hi = _mm256_add_epi32(_mm256_set1_epi32(int(uint32_t(c >> 32) + 1u)), no_carry);
    I h = mix32(_mm256_xor_si256(lo, _mm256_set1_epi32(int(key.k0))));
    h = mix32(_mm256_xor_si256(_mm256_xor_si256(h, hi), _mm256_set1_epi32(int(key.k1))));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), _mm256_set1_ps(0x1p-24f));
  }

  // Codes of 8 values as int32 lanes; with error feedback also stores the
  // new residual at r_out.
  template <bool kEf, bool kSr>
  static I codes(const float* x, const float* r, float* r_out, F s, F z, F top, RngKey key,
                 uint64_t c) {
    const F v = value<kEf>(x, r);
    F t = _mm256_div_ps(v, s);
    if (kSr)
      t = _mm256_round_ps(_mm256_add_ps(t, uniform(key, c)),
                          _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    else
      t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F y = _mm256_add_ps(t, z);
    y = _mm256_min_ps(_mm256_max_ps(y, _mm256_setzero_ps()), top);
    // float(q) is y itself: y is integral and in [0, qmax].
    if (kEf) _mm256_storeu_ps(r_out, _mm256_sub_ps(v, _mm256_mul_ps(s, _mm256_sub_ps(y, z))));
    return _mm256_cvttps_epi32(y);
  }

  template <bool kEf>
  static uint32_t minmax(const float* x, const float* r, size_t len, float& mn, float& mx) {
    // Four accumulators, so min/max latency does not bound a 512-float channel.
    F lo[4], hi[4];
    I am[4];
    for (int k = 0; k < 4; ++k) {
      lo[k] = hi[k] = _mm256_setzero_ps();
      am[k] = _mm256_setzero_si256();
    }
    const I abs_mask = _mm256_set1_epi32(int(kAbsMask));
    size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      for (int k = 0; k < 4; ++k) {
        // One hint a 64-byte line: two loads of 8 lanes.
        if (k % 2 == 0) {
          prefetch_ahead<kMinmaxAheadBytes>(x + i + k * W);
          if (kEf) prefetch_ahead<kMinmaxAheadBytes>(r + i + k * W);
        }
        const F v = value<kEf>(x + i + k * W, kEf ? r + i + k * W : nullptr);
        lo[k] = _mm256_min_ps(lo[k], v);
        hi[k] = _mm256_max_ps(hi[k], v);
        am[k] = _mm256_max_epi32(am[k], _mm256_and_si256(_mm256_castps_si256(v), abs_mask));
      }
    }
    for (; i + W <= len; i += W) {
      const F v = value<kEf>(x + i, kEf ? r + i : nullptr);
      lo[0] = _mm256_min_ps(lo[0], v);
      hi[0] = _mm256_max_ps(hi[0], v);
      am[0] = _mm256_max_epi32(am[0], _mm256_and_si256(_mm256_castps_si256(v), abs_mask));
    }
    F l = _mm256_min_ps(_mm256_min_ps(lo[0], lo[1]), _mm256_min_ps(lo[2], lo[3]));
    F h = _mm256_max_ps(_mm256_max_ps(hi[0], hi[1]), _mm256_max_ps(hi[2], hi[3]));
    I a = _mm256_max_epi32(_mm256_max_epi32(am[0], am[1]), _mm256_max_epi32(am[2], am[3]));
    alignas(32) float lv[W], hv[W];
    alignas(32) uint32_t av[W];
    _mm256_store_ps(lv, l);
    _mm256_store_ps(hv, h);
    _mm256_store_si256(reinterpret_cast<I*>(av), a);
    uint32_t amax = minmax_tail<kEf>(x + i, kEf ? r + i : nullptr, len - i, mn, mx);
    // NaN lanes do not matter here: amax reports them, and the caller stops.
    for (size_t k = 0; k < W; ++k) {
      mn = lv[k] < mn ? lv[k] : mn;
      mx = hv[k] > mx ? hv[k] : mx;
      amax = av[k] > amax ? av[k] : amax;
    }
    return amax;
  }

  template <bool kEf, bool kSr>
  static void quantize(const float* x, const float* r, float* r_out, size_t len, QParams p,
                       int qmax, RngKey key, uint64_t counter, uint8_t* q) {
    const F s = _mm256_set1_ps(p.scale), z = _mm256_set1_ps(p.zero_point);
    const F top = _mm256_set1_ps(float(qmax));
    const I order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      I c[4];
      for (size_t k = 0; k < 4; ++k)
        c[k] =
            codes<kEf, kSr>(x + i + k * W, kEf ? r + i + k * W : nullptr,
                            kEf ? r_out + i + k * W : nullptr, s, z, top, key, counter + i + k * W);
      // Lane-wise packs interleave the 128-bit halves; one permute restores order.
      const I ab = _mm256_packus_epi32(c[0], c[1]);
      const I cd = _mm256_packus_epi32(c[2], c[3]);
      const I bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
      _mm256_storeu_si256(reinterpret_cast<I*>(q + i), bytes);
    }
    for (; i + W <= len; i += W) {
      const I c = codes<kEf, kSr>(x + i, kEf ? r + i : nullptr, kEf ? r_out + i : nullptr, s, z,
                                  top, key, counter + i);
      __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packus_epi16(w, w));
    }
    quantize_tail<kEf, kSr>(x + i, kEf ? r + i : nullptr, kEf ? r_out + i : nullptr, len - i, p,
                            qmax, key, counter + i, q + i);
  }

  // No streaming stores at this level: 32-byte ones took 5.5 ms to decode
  // 25 MB here, against 1.0 ms with normal stores.
  template <bool kAdd, bool kStream>
  static void dequantize(const uint8_t* q, size_t len, QParams p, float* out) {
    const F s = _mm256_set1_ps(p.scale), z = _mm256_set1_ps(p.zero_point);
    size_t i = 0;
    for (; i + W <= len; i += W) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
      const F f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
      F d = _mm256_mul_ps(s, _mm256_sub_ps(f, z));
      if (kAdd) d = _mm256_add_ps(_mm256_loadu_ps(out + i), d);
      _mm256_storeu_ps(out + i, d);
    }
    dequantize_tail<kAdd>(q + i, len - i, p, out + i);
  }

  static void store_fence() {}

  static uint32_t abs_max(const float* x, size_t n) {
    const I abs_mask = _mm256_set1_epi32(int(kAbsMask));
    I a0 = _mm256_setzero_si256(), a1 = a0;
    size_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      a0 = _mm256_max_epi32(a0, _mm256_and_si256(_mm256_loadu_si256((const I*)(x + i)), abs_mask));
      a1 = _mm256_max_epi32(a1,
                            _mm256_and_si256(_mm256_loadu_si256((const I*)(x + i + W)), abs_mask));
    }
    return reduce_max(_mm256_max_epi32(a0, a1), abs_max_tail(x + i, n - i));
  }

  static bool all_finite_pair(const float* x, const float* r, size_t n) {
    const I abs_mask = _mm256_set1_epi32(int(kAbsMask));
    I a = _mm256_setzero_si256(), b = a;
    size_t i = 0;
    for (; i + W <= n; i += W) {
      a = _mm256_max_epi32(a, _mm256_and_si256(_mm256_loadu_si256((const I*)(x + i)), abs_mask));
      b = _mm256_max_epi32(b, _mm256_and_si256(_mm256_loadu_si256((const I*)(r + i)), abs_mask));
    }
    return reduce_max(_mm256_max_epi32(a, b), 0) < kInfBits &&
           all_finite_pair_tail(x + i, r + i, n - i);
  }

  static uint32_t reduce_max(I a, uint32_t m) {
    alignas(32) uint32_t v[W];
    _mm256_store_si256(reinterpret_cast<I*>(v), a);
    for (size_t k = 0; k < W; ++k) m = v[k] > m ? v[k] : m;
    return m;
  }

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

}  // namespace

// The AVX-512 level reuses these: they are memory-bound shuffles.
void pack_avx2(const uint8_t* q, size_t n, int bits, uint8_t* out) {
  Avx2::pack(q, n, bits, out);
}
void unpack_avx2(const uint8_t* in, size_t n, int bits, uint8_t* q) {
  Avx2::unpack(in, n, bits, q);
}

}  // namespace quantization
}  // namespace ddph

#pragma GCC pop_options

namespace ddph {
namespace quantization {

const QuantTable* quant_table_avx2() {
  static const QuantTable table = make_quant_table<Avx2>();
  return &table;
}

}  // namespace quantization
}  // namespace ddph

#else

namespace ddph {
namespace quantization {
const QuantTable* quant_table_avx2() {
  return nullptr;
}
}  // namespace quantization
}  // namespace ddph

#endif
