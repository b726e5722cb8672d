// The host LowRankOps: lowrank.h and orthogonalize.h as they were called
// before the interface existed, so the CPU path keeps its bits.
#include <cstring>

#include "core/base/error.h"
#include "plugins/powersgd/huge_values.h"
#include "plugins/powersgd/lowrank.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/orthogonalize.h"

namespace ddph {
namespace powersgd {
namespace {

class CpuOps final : public LowRankOps {
 public:
  void set_stream(void*) override {}
  void add(float* a, const float* b, size_t n) override {
    for (size_t i = 0; i < n; ++i) a[i] = saturated_add(a[i], b[i]);
  }
  void subtract(float* a, const float* b, size_t n) override {
    for (size_t i = 0; i < n; ++i) a[i] = saturated_subtract(a[i], b[i]);
  }
  void scaled_copy(float* dst, const float* src, size_t n, float factor) override {
    for (size_t i = 0; i < n; ++i) dst[i] = saturated_scale(src[i], factor);
  }
  void flag_unusable(const float* x, size_t n, float limit, float* flag) override {
    bool bad = false;
    for (size_t i = 0; i < n; ++i) bad |= unusable_factor(x[i], limit);
    if (bad) *flag = 1.0f;
  }
  bool flag_set(const float* flag) override { return *flag != 0.0f; }
  void poison_unusable(float* x, size_t n, float limit) override {
    for (size_t i = 0; i < n; ++i) x[i] = powersgd::poison_unusable(x[i], limit);
  }
  void saturate_overflow(float* m, const float* data, size_t n) override {
    for (size_t i = 0; i < n; ++i) m[i] = overflow_to_max(m[i], data[i]);
  }
  void fallback_error(float* err, const float* mean, size_t n) override {
    for (size_t i = 0; i < n; ++i) err[i] = powersgd::fallback_error(err[i], mean[i]);
  }
  void copy(float* dst, const float* src, size_t n) override {
    if (n > 0) std::memcpy(dst, src, n * sizeof(float));  // memcpy(NULL, ..., 0) is undefined
  }
  void zero(float* dst, size_t n) override {
    if (n > 0) std::memset(dst, 0, n * sizeof(float));
  }
  void multiply_mq(const float* data, float* err, int rows, int cols, const float* q, int r,
                   float* p) override {
    powersgd::multiply_mq(data, err, rows, cols, q, r, p);
  }
  bool defers_error() const override { return true; }
  void multiply_mq_deferred(const float* data, float* err, int rows, int cols, const float* q,
                            int r, float* p, const float* p_last, const float* q_last) override {
    powersgd::multiply_mq(data, err, rows, cols, q, r, p, Pending{p_last, q_last});
  }
  void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q) override {
    powersgd::multiply_mtp(m, rows, cols, p, r, q);
  }
  void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                   float* before) override {
    powersgd::reconstruct(p, q, rows, cols, r, out, before);
  }
  void orthogonalize(float* a, int batch, int rows, int cols, float eps) override {
    const size_t each = size_t(rows) * size_t(cols);
    for (int b = 0; b < batch; ++b) powersgd::orthogonalize(a + size_t(b) * each, rows, cols, eps);
  }
  void upload(float* dst, const float* host, size_t n) override { copy(dst, host, n); }
  void download(float* host, const float* src, size_t n) override { copy(host, src, n); }
};

}  // namespace

void LowRankOps::multiply_mq_deferred(const float*, float*, int, int, const float*, int, float*,
                                      const float*, const float*) {
  DDPH_FAIL(DDPH_INTERNAL, "powersgd: this memory keeps no deferred error");
}

LowRankOps& cpu_ops() {
  static CpuOps ops;
  return ops;
}

}  // namespace powersgd
}  // namespace ddph
