#include "plugins/powersgd/bucket_plan.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/base/error.h"
#include "core/hook/param_view.h"

namespace ddph {
namespace powersgd {
namespace {

struct View {
  int64_t offset, numel, rows;
};

std::vector<View> param_views(const ddph_bucket_t& bucket, const char* hook) {
  const int64_t n = bucket.buffer.shape[0];
  std::vector<View> views;
  if (bucket.num_params == 0) {
    views.push_back(View{0, n, n});
    return views;
  }
  for (size_t i = 0; i < bucket.num_params; ++i) {
    const ddph_param_t& p = bucket.params[i];
    const int64_t numel = view_numel(p);
    // A 0-d parameter is a 1 x 1 matrix; an empty one has nothing to send.
    if (numel > 0) views.push_back(View{p.offset, numel, p.ndim == 0 ? 1 : p.shape[0]});
  }
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const View& v : views) spans.emplace_back(v.offset, v.offset + v.numel);
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    DDPH_CHECK(spans[i].first >= spans[i - 1].second, DDPH_INVALID_ARGUMENT,
               "powersgd/" << hook << ": bucket " << bucket.index
                           << ": parameter views overlap (elements [" << spans[i].first << ", "
                           << std::min(spans[i].second, spans[i - 1].second) << "))");
  return views;
}

}  // namespace

BucketPlan plan_bucket(const ddph_bucket_t& bucket, int rank, double min_compression_rate,
                       const char* hook) {
  const std::vector<View> views = param_views(bucket, hook);
  BucketPlan plan;
  std::vector<MatrixSlot> compressed;  // bucket order
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const View& v : views) {
    const int64_t n = v.rows, m = v.numel / v.rows;
    const int64_t r = std::min(std::min(n, m), int64_t(rank));
    plan.numel_before += n * m;
    spans.emplace_back(v.offset, v.numel);
    // As _should_compress: (n + m) * r * rate < n * m, in floating point
    // like Python's mixed int/float arithmetic.
    if (double(n + m) * double(r) * min_compression_rate < double(n * m)) {
      DDPH_CHECK(n <= INT32_MAX && m <= INT32_MAX, DDPH_UNSUPPORTED,
                 "powersgd/" << hook << ": a " << n << " x " << m << " gradient is too large");
      MatrixSlot s;
      s.offset = v.offset;
      s.rows = int(n);
      s.cols = int(m);
      s.r = int(r);
      compressed.push_back(s);
      plan.numel_after += (n + m) * r;
    } else {
      plan.uncompressed.push_back(Segment{v.offset, v.numel});
      plan.numel_after += n * m;
    }
  }
  // Elements outside every view travel uncompressed, so the bucket always
  // ends up holding a mean.
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  const int64_t total = bucket.buffer.shape[0];
  for (const auto& s : spans) {
    if (s.first > at) plan.uncompressed.push_back(Segment{at, s.first - at});
    at = std::max(at, s.first + s.second);
  }
  if (at < total) plan.uncompressed.push_back(Segment{at, total - at});
  for (const Segment& s : plan.uncompressed) plan.uncompressed_numel += s.numel;

  std::map<std::pair<int, int>, size_t> group_of;
  for (const MatrixSlot& s : compressed) {
    auto key = std::make_pair(s.rows, s.cols);
    auto it = group_of.find(key);
    if (it == group_of.end()) {
      it = group_of.emplace(key, plan.groups.size()).first;
      plan.groups.push_back(ShapeGroup{s.rows, s.cols, s.r, {}});
    }
    plan.groups[it->second].members.push_back(-1);  // filled below
  }
  std::vector<std::vector<MatrixSlot>> by_group(plan.groups.size());
  for (const MatrixSlot& s : compressed) by_group[group_of[{s.rows, s.cols}]].push_back(s);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    for (size_t k = 0; k < by_group[g].size(); ++k) {
      MatrixSlot s = by_group[g][k];
      s.p_offset = plan.p_numel;
      s.q_offset = plan.q_numel;
      plan.p_numel += int64_t(s.rows) * s.r;
      plan.q_numel += int64_t(s.cols) * s.r;
      plan.groups[g].members[k] = int(plan.matrices.size());
      plan.matrices.push_back(s);
    }
  }
  return plan;
}

}  // namespace powersgd
}  // namespace ddph
