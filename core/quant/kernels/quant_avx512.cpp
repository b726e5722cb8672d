// The AVX-512 F/BW/VL level: 16 lanes, the same operation sequence as the
// AVX2 level and quant_math.h (vdivps, vrndscaleps to nearest-even or down,
// vaddps/vmaxps/vminps, vcvttps2dq), with vpmovdb storing the codes.
// Pack/unpack reuse the AVX2 shuffles: they are memory-bound.

#include "core/kernels/prefetch.h"
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

#pragma GCC push_options
#pragma GCC target("avx2,f16c,avx512f,avx512bw,avx512vl")

namespace ddph {
namespace quantization {
namespace {

#include "core/quant/kernels/quant_loops.inc"

struct Avx512 {
  static constexpr size_t W = 16;
  using F = __m512;
  using I = __m512i;

  template <bool kEf>
  static F value(const float* x, const float* r) {
    const F v = _mm512_loadu_ps(x);
    return kEf ? _mm512_add_ps(v, _mm512_loadu_ps(r)) : v;
  }

  static I mix32(I x) {
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7FEB352D));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32(int(0x846CA68Bu)));
    return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  }

  // uniform01 for counters c .. c+15, as bits_to_unit(random_bits(key, .)).
  static F uniform(RngKey key, uint64_t c) {
    const I base = _mm512_set1_epi32(int(uint32_t(c)));
    const I lo = _mm512_add_epi32(
        base, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    // High word: +1 in the lanes where the low word wrapped (lo < base).
    const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, base);
    const I hi0 = _mm512_set1_epi32(int(uint32_t(c >> 32)));
    const I hi = _mm512_mask_add_epi32(hi0, carry, hi0, _mm512_set1_epi32(1));
    I h = mix32(_mm512_xor_si512(lo, _mm512_set1_epi32(int(key.k0))));
    h = mix32(_mm512_xor_si512(_mm512_xor_si512(h, hi), _mm512_set1_epi32(int(key.k1))));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), _mm512_set1_ps(0x1p-24f));
  }

  // With error feedback also stores the new residual at r_out.
  template <bool kEf, bool kSr>
  static __m128i codes(const float* x, const float* r, float* r_out, F s, F z, F top, RngKey key,
                       uint64_t c) {
    const F v = value<kEf>(x, r);
    F t = _mm512_div_ps(v, s);
    if (kSr)
      t = _mm512_roundscale_ps(_mm512_add_ps(t, uniform(key, c)),
                               _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    else
      t = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F y = _mm512_add_ps(t, z);
    y = _mm512_min_ps(_mm512_max_ps(y, _mm512_setzero_ps()), top);
    // float(q) is y itself: y is integral and in [0, qmax].
    if (kEf) _mm512_storeu_ps(r_out, _mm512_sub_ps(v, _mm512_mul_ps(s, _mm512_sub_ps(y, z))));
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(y));
  }

  template <bool kEf>
  static uint32_t minmax(const float* x, const float* r, size_t len, float& mn, float& mx) {
    F lo[4], hi[4];
    I am[4];
    for (int k = 0; k < 4; ++k) {
      lo[k] = hi[k] = _mm512_setzero_ps();
      am[k] = _mm512_setzero_si512();
    }
    const I abs_mask = _mm512_set1_epi32(int(kAbsMask));
    size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      for (int k = 0; k < 4; ++k) {
        // One hint a 64-byte line.
        prefetch_ahead<kMinmaxAheadBytes>(x + i + k * W);
        if (kEf) prefetch_ahead<kMinmaxAheadBytes>(r + i + k * W);
        const F v = value<kEf>(x + i + k * W, kEf ? r + i + k * W : nullptr);
        lo[k] = _mm512_min_ps(lo[k], v);
        hi[k] = _mm512_max_ps(hi[k], v);
        am[k] = _mm512_max_epu32(am[k], _mm512_and_si512(_mm512_castps_si512(v), abs_mask));
      }
    }
    for (; i + W <= len; i += W) {
      const F v = value<kEf>(x + i, kEf ? r + i : nullptr);
      lo[0] = _mm512_min_ps(lo[0], v);
      hi[0] = _mm512_max_ps(hi[0], v);
      am[0] = _mm512_max_epu32(am[0], _mm512_and_si512(_mm512_castps_si512(v), abs_mask));
    }
    const F l = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
    const F h = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
    const I a = _mm512_max_epu32(_mm512_max_epu32(am[0], am[1]), _mm512_max_epu32(am[2], am[3]));
    uint32_t amax = minmax_tail<kEf>(x + i, kEf ? r + i : nullptr, len - i, mn, mx);
    // NaN lanes do not matter here: amax reports them, and the caller stops.
    const float lr = _mm512_reduce_min_ps(l), hr = _mm512_reduce_max_ps(h);
    const uint32_t ar = _mm512_reduce_max_epu32(a);
    mn = lr < mn ? lr : mn;
    mx = hr > mx ? hr : mx;
    return ar > amax ? ar : amax;
  }

  template <bool kEf, bool kSr>
  static void quantize(const float* x, const float* r, float* r_out, size_t len, QParams p,
                       int qmax, RngKey key, uint64_t counter, uint8_t* q) {
    const F s = _mm512_set1_ps(p.scale), z = _mm512_set1_ps(p.zero_point);
    const F top = _mm512_set1_ps(float(qmax));
    size_t i = 0;
    for (; i + W <= len; i += W) {
      const __m128i c = codes<kEf, kSr>(x + i, kEf ? r + i : nullptr, kEf ? r_out + i : nullptr, s,
                                        z, top, key, counter + i);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), c);
    }
    quantize_tail<kEf, kSr>(x + i, kEf ? r + i : nullptr, kEf ? r_out + i : nullptr, len - i, p,
                            qmax, key, counter + i, q + i);
  }

  template <bool kAdd, bool kStream>
  static void dequantize(const uint8_t* q, size_t len, QParams p, float* out) {
    const F s = _mm512_set1_ps(p.scale), z = _mm512_set1_ps(p.zero_point);
    size_t i = 0;
    // Streaming stores need aligned addresses: the head goes through the tail.
    if (kStream) {
      const size_t misaligned = reinterpret_cast<uintptr_t>(out) % 64;
      i = misaligned == 0 ? 0 : (64 - misaligned) / sizeof(float);
      i = i < len ? i : len;
      dequantize_tail<false>(q, i, p, out);
    }
    for (; i + W <= len; i += W) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
      const F f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
      F d = _mm512_mul_ps(s, _mm512_sub_ps(f, z));
      if (kAdd) d = _mm512_add_ps(_mm512_loadu_ps(out + i), d);
      if (kStream)
        _mm512_stream_ps(out + i, d);
      else
        _mm512_storeu_ps(out + i, d);
    }
    dequantize_tail<kAdd>(q + i, len - i, p, out + i);
  }

  static void store_fence() { _mm_sfence(); }

  static uint32_t abs_max(const float* x, size_t n) {
    const I abs_mask = _mm512_set1_epi32(int(kAbsMask));
    I a0 = _mm512_setzero_si512(), a1 = a0;
    size_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      a0 = _mm512_max_epu32(a0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
      a1 = _mm512_max_epu32(a1, _mm512_and_si512(_mm512_loadu_si512(x + i + W), abs_mask));
    }
    const uint32_t v = _mm512_reduce_max_epu32(_mm512_max_epu32(a0, a1));
    const uint32_t t = abs_max_tail(x + i, n - i);
    return v > t ? v : t;
  }

  static bool all_finite_pair(const float* x, const float* r, size_t n) {
    const I abs_mask = _mm512_set1_epi32(int(kAbsMask));
    I a = _mm512_setzero_si512(), b = a;
    size_t i = 0;
    for (; i + W <= n; i += W) {
      a = _mm512_max_epu32(a, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
      b = _mm512_max_epu32(b, _mm512_and_si512(_mm512_loadu_si512(r + i), abs_mask));
    }
    return _mm512_reduce_max_epu32(_mm512_max_epu32(a, b)) < kInfBits &&
           all_finite_pair_tail(x + i, r + i, n - i);
  }

  static void pack(const uint8_t* q, size_t n, int bits, uint8_t* out) {
    pack_avx2(q, n, bits, out);
  }
  static void unpack(const uint8_t* in, size_t n, int bits, uint8_t* q) {
    unpack_avx2(in, n, bits, q);
  }
};

}  // namespace
}  // namespace quantization
}  // namespace ddph

#pragma GCC pop_options

namespace ddph {
namespace quantization {

const QuantTable* quant_table_avx512() {
  static const QuantTable table = make_quant_table<Avx512>();
  return &table;
}

}  // namespace quantization
}  // namespace ddph

#else

namespace ddph {
namespace quantization {
const QuantTable* quant_table_avx512() {
  return nullptr;
}
}  // namespace quantization
}  // namespace ddph

#endif
