#include "plugins/powersgd/lowrank.h"

#include <cblas.h>
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "core/kernels/clones.h"
#include "core/kernels/isa.h"
#include "core/kernels/prefetch.h"

namespace ddph {
namespace powersgd {
namespace {

#define DDPH_INLINE inline __attribute__((always_inline))

constexpr int kLanes = 16;
// Outputs this large skip the cache (reconstruct_streaming).
constexpr size_t kStreamingBytes = size_t(1) << 20;
// How far ahead the streaming passes over M prefetch it. The hardware
// prefetchers lag behind these loops, which also keep up to 8 rows of Q^T
// and Q'^T in flight: at r = 4 prefetching 4 KiB ahead took the deferred
// P = M Q from 15.7 to 9.8 ms and M^T P (4 rows ahead) from 5.7 to 2.9 ms
// on the benchmark bucket (docs/benchmarks.md#powersgd).
constexpr uintptr_t kAheadBytes = 4096;

// Q (cols x r) as Q^T (r x cols): unit stride along the rows of M.
std::vector<float> transposed(const float* q, int cols, int r) {
  std::vector<float> qt(size_t(r) * size_t(cols));
  for (int j = 0; j < cols; ++j)
    for (int k = 0; k < r; ++k) qt[size_t(k) * cols + j] = q[size_t(j) * r + k];
  return qt;
}

// 16 floats as one value: the compiler maps it onto whatever registers the
// ISA level has (one zmm, two ymm, four xmm) and keeps R of them as
// accumulators, where plain float arrays were spilled to the stack.
typedef float Vec __attribute__((vector_size(64)));
typedef float VecU __attribute__((vector_size(64), aligned(4), may_alias));  // unaligned access

DDPH_INLINE Vec load(const float* p) {
  return *reinterpret_cast<const VecU*>(p);
}
DDPH_INLINE void store(float* p, Vec v) {
  *reinterpret_cast<VecU*>(p) = v;
}

// Columns j..j+15 of one row of P Q^T, given the row of P and Q^T: the
// products in order of k, each rounded, summed left to right (this file is
// built with -ffp-contract=off, so no clone fuses a multiply-add). The
// reconstruction and the deferred error both use it, so they agree to the
// bit, and ranks on different CPUs do too. R = 0: r given at run time.
template <int R>
DDPH_INLINE Vec lowrank_block(const float* pi, const float* qt, int cols, int r, int j) {
  const int rr = R > 0 ? R : r;
  Vec v = pi[0] * load(qt + j);
  for (int k = 1; k < rr; ++k) v += pi[k] * load(qt + size_t(k) * cols + j);
  return v;
}
template <int R>
DDPH_INLINE float lowrank_element(const float* pi, const float* qt, int cols, int r, int j) {
  const int rr = R > 0 ? R : r;
  float v = pi[0] * qt[j];
  for (int k = 1; k < rr; ++k) v += pi[k] * qt[size_t(k) * cols + j];
  return v;
}

// What the error buffer holds when P = M Q is formed.
enum class Feedback {
  kNone,      // no error feedback: M is the data
  kEager,     // the error: M = data + error
  kDeferred,  // last M, with the error M - P' Q'^T: M = data + (last M - P' Q'^T)
};

// One row of P = M Q: R dot products of the row with Q^T's rows, kLanes
// partial sums each. With feedback M is written to the error buffer on the
// way. pp: this row of P' (kDeferred), qpt: Q'^T.
template <int R, Feedback F>
DDPH_INLINE void project_row(const float* d, float* e, int cols, const float* qt, float* p,
                             const float* pp, const float* qpt) {
  Vec acc[R];
  for (int k = 0; k < R; ++k) acc[k] = Vec{};
  int j = 0;
  for (; j + kLanes <= cols; j += kLanes) {
    // The eager form (a bucket's first compressed step only) measured
    // slower with the hints at r = 4.
    if (F != Feedback::kEager) prefetch_ahead<kAheadBytes, 0>(d + j);
    if (F == Feedback::kDeferred) prefetch_ahead<kAheadBytes, 1>(e + j);
    Vec m = load(d + j);
    if (F == Feedback::kEager) m += load(e + j);
    if (F == Feedback::kDeferred) m += load(e + j) - lowrank_block<R>(pp, qpt, cols, R, j);
    if (F != Feedback::kNone) store(e + j, m);
    for (int k = 0; k < R; ++k) acc[k] += m * load(qt + size_t(k) * cols + j);
  }
  float tail[R] = {};
  for (; j < cols; ++j) {
    float m = d[j];
    if (F == Feedback::kEager) m += e[j];
    if (F == Feedback::kDeferred) m += e[j] - lowrank_element<R>(pp, qpt, cols, R, j);
    if (F != Feedback::kNone) e[j] = m;
    for (int k = 0; k < R; ++k) tail[k] += m * qt[size_t(k) * cols + j];
  }
  for (int k = 0; k < R; ++k) {
    float s = tail[k];
    for (int l = 0; l < kLanes; ++l) s += acc[k][l];
    p[k] = s;
  }
}

template <int R, Feedback F>
DDPH_INLINE void project_rows(const float* d, float* e, int rows, int cols, const float* qt,
                              float* p, const float* pp, const float* qpt) {
  for (int i = 0; i < rows; ++i) {
    const size_t at = size_t(i) * size_t(cols);
    project_row<R, F>(d + at, F == Feedback::kNone ? nullptr : e + at, cols, qt, p + size_t(i) * R,
                      F == Feedback::kDeferred ? pp + size_t(i) * R : nullptr, qpt);
  }
}

template <int R>
DDPH_INLINE void project(const float* d, float* e, int rows, int cols, const float* qt, float* p,
                         const float* pp, const float* qpt) {
  if (e == nullptr)
    project_rows<R, Feedback::kNone>(d, e, rows, cols, qt, p, pp, qpt);
  else if (pp == nullptr)
    project_rows<R, Feedback::kEager>(d, e, rows, cols, qt, p, pp, qpt);
  else
    project_rows<R, Feedback::kDeferred>(d, e, rows, cols, qt, p, pp, qpt);
}

DDPH_ISA_CLONES void project_small(const float* d, float* e, int rows, int cols, const float* qt,
                                   int r, float* p, const float* pp, const float* qpt) {
  switch (r) {
    case 1:
      return project<1>(d, e, rows, cols, qt, p, pp, qpt);
    case 2:
      return project<2>(d, e, rows, cols, qt, p, pp, qpt);
    case 3:
      return project<3>(d, e, rows, cols, qt, p, pp, qpt);
    default:
      return project<4>(d, e, rows, cols, qt, p, pp, qpt);
  }
}

// Q^T += P^T M, four rows of M at a time: each 16-column block of Q^T is
// loaded and stored once per four rows, where a row at a time made Q^T's
// loads and stores (r per element of M) the bottleneck at r = 4.
template <int R>
DDPH_INLINE void accumulate_rows(const float* m, int rows, int cols, const float* p, float* qt) {
  int i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float* m0 = m + size_t(i) * size_t(cols);
    const float* m1 = m0 + cols;
    const float* m2 = m1 + cols;
    const float* m3 = m2 + cols;
    const float* pi = p + size_t(i) * R;
    const float* next = i + 8 <= rows ? m3 + cols : nullptr;  // the next four rows, prefetched
    int j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      if (next != nullptr)
        for (int k = 0; k < 4; ++k) __builtin_prefetch(next + size_t(k) * cols + j);
      const Vec a = load(m0 + j), b = load(m1 + j), c = load(m2 + j), d = load(m3 + j);
      for (int k = 0; k < R; ++k) {
        float* q = qt + size_t(k) * cols + j;
        store(q, load(q) + pi[k] * a + pi[R + k] * b + pi[2 * R + k] * c + pi[3 * R + k] * d);
      }
    }
    for (; j < cols; ++j)
      for (int k = 0; k < R; ++k)
        qt[size_t(k) * cols + j] +=
            pi[k] * m0[j] + pi[R + k] * m1[j] + pi[2 * R + k] * m2[j] + pi[3 * R + k] * m3[j];
  }
  for (; i < rows; ++i) {
    const float* row = m + size_t(i) * size_t(cols);
    for (int k = 0; k < R; ++k) {
      const float pk = p[size_t(i) * R + k];
      float* q = qt + size_t(k) * cols;
      for (int j = 0; j < cols; ++j) q[j] += pk * row[j];
    }
  }
}

DDPH_ISA_CLONES void accumulate_mtp(const float* m, int rows, int cols, const float* p, int r,
                                    float* qt) {
  switch (r) {
    case 1:
      return accumulate_rows<1>(m, rows, cols, p, qt);
    case 2:
      return accumulate_rows<2>(m, rows, cols, p, qt);
    case 3:
      return accumulate_rows<3>(m, rows, cols, p, qt);
    default:
      return accumulate_rows<4>(m, rows, cols, p, qt);
  }
}

}  // namespace

void multiply_mq(const float* data, float* err, int rows, int cols, const float* q, int r, float* p,
                 Pending pending) {
  const bool deferred = err != nullptr && pending.p != nullptr;
  if (r <= 4) {
    const std::vector<float> qt = transposed(q, cols, r);
    const std::vector<float> qpt = deferred ? transposed(pending.q, cols, r) : std::vector<float>();
    project_small(data, err, rows, cols, qt.data(), r, p, deferred ? pending.p : nullptr,
                  deferred ? qpt.data() : nullptr);
    return;
  }
  // Larger ranks: settle the error first (its own pass), then as eagerly.
  if (deferred) reconstruct(pending.p, pending.q, rows, cols, r, nullptr, err);
  const float* m = data;
  if (err != nullptr) {
    const size_t n = size_t(rows) * size_t(cols);
    for (size_t i = 0; i < n; ++i) err[i] += data[i];
    m = err;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, r, cols, 1.0f, m, cols, q, r, 0.0f,
              p, r);
}

void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q) {
  if (r <= 4) {
    std::vector<float> qt(size_t(r) * size_t(cols), 0.0f);
    accumulate_mtp(m, rows, cols, p, r, qt.data());
    for (int j = 0; j < cols; ++j)
      for (int k = 0; k < r; ++k) q[size_t(j) * r + k] = qt[size_t(k) * cols + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, r, rows, 1.0f, m, cols, p, r, 0.0f, q,
              r);
}

namespace {

// One row of P Q^T (and the error) in one pass: each 16-column chunk is
// summed over k in registers, stored once, and subtracted from `before`
// while it is still there. kOut false: only the subtraction (settling a
// deferred error). R = 0: r given at run time.
template <int R, bool kOut>
DDPH_INLINE void reconstruct_rows(const float* p, const float* qt, int rows, int cols, int r,
                                  float* out, float* before) {
  const int rr = R > 0 ? R : r;
  for (int i = 0; i < rows; ++i) {
    float* o = kOut ? out + size_t(i) * cols : nullptr;
    float* e = before == nullptr ? nullptr : before + size_t(i) * cols;
    const float* pi = p + size_t(i) * rr;
    int j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      const Vec v = lowrank_block<R>(pi, qt, cols, rr, j);
      // `before` is loaded ahead of the store to `out`: the two often sit at
      // the same offset in their pages, and a load behind a store to the
      // same 4 KiB offset waits for it (4K aliasing).
      if (e != nullptr) {
        const Vec m = load(e + j);
        if (kOut) store(o + j, v);
        store(e + j, m - v);
      } else if (kOut) {
        store(o + j, v);
      }
    }
    for (; j < cols; ++j) {
      const float v = lowrank_element<R>(pi, qt, cols, rr, j);
      if (kOut) o[j] = v;
      if (e != nullptr) e[j] -= v;
    }
  }
}

template <int R>
DDPH_INLINE void reconstruct_r(const float* p, const float* qt, int rows, int cols, int r,
                               float* out, float* before) {
  if (out != nullptr)
    reconstruct_rows<R, true>(p, qt, rows, cols, r, out, before);
  else
    reconstruct_rows<R, false>(p, qt, rows, cols, r, out, before);
}

// out = P Q^T (no error) with non-temporal stores, for matrices of
// kStreamingBytes or more: the bucket was last read two passes ago and is
// out of the cache, so a normal store would first read each line back.
// AVX-512 only (64-byte stores, as the quantization decoder's). On one
// rank: 6-7.5 -> 4 ms for 100 MiB at r = 1.
//
// lowrank_block's arithmetic, written out: Clang refuses a call that
// returns a 64-byte vector from a function built without AVX-512 (the ABI
// differs), even one it would inline. The same products in the same order
// give the same bits (tested against the cached path and a scalar loop).
template <int R>
__attribute__((target("avx512f"))) void reconstruct_streaming(const float* p, const float* qt,
                                                              int rows, int cols, float* out) {
  for (int i = 0; i < rows; ++i) {
    float* o = out + size_t(i) * cols;
    const float* pi = p + size_t(i) * R;
    int j = 0;
    for (; j < cols && (reinterpret_cast<uintptr_t>(o + j) & 63) != 0; ++j)
      o[j] = lowrank_element<R>(pi, qt, cols, R, j);
    for (; j + kLanes <= cols; j += kLanes) {
      Vec v = pi[0] * *reinterpret_cast<const VecU*>(qt + j);
      for (int k = 1; k < R; ++k)
        v += pi[k] * *reinterpret_cast<const VecU*>(qt + size_t(k) * cols + j);
      _mm512_stream_ps(o + j, (__m512)v);
    }
    for (; j < cols; ++j) o[j] = lowrank_element<R>(pi, qt, cols, R, j);
  }
  _mm_sfence();
}

// Every rank reconstructs from the same P and Q, and must get the same
// bits on any CPU: lowrank_block's clones differ in speed only (tested
// against a scalar loop).
DDPH_ISA_CLONES void reconstruct_any(const float* p, const float* qt, int rows, int cols, int r,
                                     float* out, float* before) {
  switch (r) {
    case 1:
      return reconstruct_r<1>(p, qt, rows, cols, r, out, before);
    case 2:
      return reconstruct_r<2>(p, qt, rows, cols, r, out, before);
    case 3:
      return reconstruct_r<3>(p, qt, rows, cols, r, out, before);
    case 4:
      return reconstruct_r<4>(p, qt, rows, cols, r, out, before);
    default:
      return reconstruct_r<0>(p, qt, rows, cols, r, out, before);
  }
}

}  // namespace

void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                 float* before) {
  const std::vector<float> qt = transposed(q, cols, r);
  if (out != nullptr && before == nullptr && r <= 4 &&
      size_t(rows) * size_t(cols) * sizeof(float) >= kStreamingBytes &&
      isa_active() >= Isa::kAvx512) {
    switch (r) {
      case 1:
        return reconstruct_streaming<1>(p, qt.data(), rows, cols, out);
      case 2:
        return reconstruct_streaming<2>(p, qt.data(), rows, cols, out);
      case 3:
        return reconstruct_streaming<3>(p, qt.data(), rows, cols, out);
      default:
        return reconstruct_streaming<4>(p, qt.data(), rows, cols, out);
    }
  }
  reconstruct_any(p, qt.data(), rows, cols, r, out, before);
}

}  // namespace powersgd
}  // namespace ddph
