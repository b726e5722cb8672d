#include "plugins/optimizer_overlap/param_select.h"

#include <algorithm>

#include "core/base/error.h"
#include "core/hook/hook.h"

namespace ddph {
namespace optimizer_overlap {

ParamSelection::ParamSelection(std::vector<size_t> indices,
                               const std::vector<std::vector<size_t>>& groups)
    : indices_(std::move(indices)) {
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t index : groups[g]) group_of_.emplace(index, uint32_t(g + 1));
}

void ParamSelection::select(const ddph_bucket_t& bucket, std::vector<char>* selected,
                            std::vector<uint32_t>* group) {
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
  const size_t n = bucket.num_params;
  selected->assign(n, 1);
  group->assign(n, 0);
  if (ids == nullptr) {
    index_by_position(bucket, &index_);
  } else {
    // A negative id matches no index.
    index_.assign(n, UINT64_MAX);
    for (size_t i = 0; i < n; ++i)
      if (ids[i] >= 0) index_[i] = uint64_t(ids[i]);
  }
  if (!by_index()) return;
  for (size_t i = 0; i < n; ++i) {
    if (!indices_.empty())
      (*selected)[i] = std::binary_search(indices_.begin(), indices_.end(), index_[i]) ? 1 : 0;
    const auto g = group_of_.find(index_[i]);
    if (g != group_of_.end()) (*group)[i] = g->second;
  }
}

void ParamSelection::index_by_position(const ddph_bucket_t& bucket, std::vector<uint64_t>* index) {
  const size_t n = bucket.num_params;
  auto known = counts_.emplace(bucket.index, n);
  DDPH_CHECK(known.first->second == n, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: bucket " << bucket.index << " has " << n
                                            << " parameters, but had " << known.first->second
                                            << " before; the optimizer state follows parameter "
                                               "positions, so buckets must keep their layout");
  index->assign(n, UINT64_MAX);
  if (!by_index()) return;
  size_t first = 0;
  uint64_t expect = 0;
  for (const auto& kv : counts_) {
    if (kv.first >= bucket.index) break;
    DDPH_CHECK(kv.first == expect, DDPH_INVALID_ARGUMENT,
               "hook_then_optimizer: option '"
                   << option() << "' counts parameters over buckets 0, 1, 2, ... but bucket "
                   << bucket.index << " arrived before bucket " << expect << " was ever seen");
    first += kv.second;
    ++expect;
  }
  DDPH_CHECK(expect == bucket.index, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: option '"
                 << option() << "' counts parameters over buckets 0, 1, 2, ... but bucket "
                 << bucket.index << " arrived before bucket " << expect << " was ever seen");
  // The step's last bucket tells how many parameters there are: an index
  // past them is a typo that would otherwise leave parameters untrained, or
  // stepped with the wrong options. Group indices lie within `params` when
  // it is given, so its largest index is the largest of all.
  const size_t last = !indices_.empty() ? indices_.back() : size_t(group_of_.rbegin()->first);
  DDPH_CHECK(!bucket.is_last || last < first + n, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: option '" << option() << "' names parameter " << last
                                             << ", but the buckets 0.." << bucket.index << " hold "
                                             << first + n << " parameters (indices 0.."
                                             << first + n - 1 << ")");
  for (size_t i = 0; i < n; ++i) (*index)[i] = first + i;
}

}  // namespace optimizer_overlap
}  // namespace ddph
