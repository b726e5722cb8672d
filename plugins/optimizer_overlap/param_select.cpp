#include "plugins/optimizer_overlap/param_select.h"

#include <algorithm>

#include "core/base/error.h"
#include "core/hook/hook.h"

namespace ddph {
namespace optimizer_overlap {

void ParamSelection::select(const ddph_bucket_t& bucket, std::vector<char>* selected) {
  const int64_t* ids = param_ids(bucket);
  const Keys keys = ids != nullptr ? Keys::kIds : Keys::kPositions;
  if (keys_ == Keys::kUnknown) keys_ = keys;
  DDPH_CHECK(keys == keys_, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: bucket " << bucket.index
                                            << (ids != nullptr ? " comes with" : " has no")
                                            << " parameter ids (bucket.param_ids), but earlier "
                                               "buckets "
                                            << (ids != nullptr ? "had none" : "had them")
                                            << "; the optimizer state is keyed by them, so a "
                                               "host gives ids for every bucket or none");
  if (ids == nullptr) return select_by_position(bucket, selected);
  const size_t n = bucket.num_params;
  selected->assign(n, 1);
  if (indices_.empty()) return;
  for (size_t i = 0; i < n; ++i)
    (*selected)[i] =
        ids[i] >= 0 && std::binary_search(indices_.begin(), indices_.end(), size_t(ids[i])) ? 1 : 0;
}

void ParamSelection::select_by_position(const ddph_bucket_t& bucket, std::vector<char>* selected) {
  const size_t n = bucket.num_params;
  auto known = counts_.emplace(bucket.index, n);
  DDPH_CHECK(known.first->second == n, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: bucket " << bucket.index << " has " << n
                                            << " parameters, but had " << known.first->second
                                            << " before; the optimizer state follows parameter "
                                               "positions, so buckets must keep their layout");
  selected->assign(n, 1);
  if (indices_.empty()) return;
  size_t first = 0;
  uint64_t expect = 0;
  for (const auto& kv : counts_) {
    if (kv.first >= bucket.index) break;
    DDPH_CHECK(kv.first == expect, DDPH_INVALID_ARGUMENT,
               "hook_then_optimizer: option 'params' counts parameters over buckets 0, 1, 2, ... "
               "but bucket "
                   << bucket.index << " arrived before bucket " << expect << " was ever seen");
    first += kv.second;
    ++expect;
  }
  DDPH_CHECK(expect == bucket.index, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: option 'params' counts parameters over buckets 0, 1, 2, ... "
             "but bucket "
                 << bucket.index << " arrived before bucket " << expect << " was ever seen");
  // The step's last bucket tells how many parameters there are: an index
  // past them is a typo that would otherwise leave parameters untrained.
  DDPH_CHECK(!bucket.is_last || indices_.back() < first + n, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: option 'params' names parameter "
                 << indices_.back() << ", but the buckets 0.." << bucket.index << " hold "
                 << first + n << " parameters (indices 0.." << first + n - 1 << ")");
  for (size_t i = 0; i < n; ++i)
    (*selected)[i] = std::binary_search(indices_.begin(), indices_.end(), first + i) ? 1 : 0;
}

}  // namespace optimizer_overlap
}  // namespace ddph
