// The `params` option: which parameters hook_then_optimizer updates, and
// `param_groups`' selections: which options each one is stepped with.
//
// PyTorch names them by tensor. Across the C ABI a host that gives
// parameter ids (ddph_bucket_t.param_ids, ABI 1.2) names them by id: the
// indices are ids, whatever bucket a parameter is in. Otherwise a parameter
// is a position in a bucket, and indices count parameters over the buckets in bucket
// index order: bucket 0's params first (params[0], params[1], ...), then
// bucket 1's, and so on, which is the same on every rank and every step.
// The hook learns each bucket's parameter count as buckets arrive, so a
// bucket's indices are known once every lower bucket index has been seen
// (DDP submits buckets in index order, so from the first step on).
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace ddph {
namespace optimizer_overlap {

class ParamSelection {
 public:
  // indices ascending and unique; empty selects every parameter. groups[g]:
  // the indices of parameter group g (disjoint, each within indices).
  ParamSelection(std::vector<size_t> indices, const std::vector<std::vector<size_t>>& groups);

  // selected->at(i) = whether bucket.params[i] is updated; group->at(i) =
  // its parameter group + 1, or 0 for the hook's own options. Throws
  // DDPH_INVALID_ARGUMENT when a bucket has ids and an earlier one had none
  // (or the other way round); without ids, when the bucket's parameter count
  // differs from an earlier step's, or, with a selection or groups, when a
  // lower bucket index has not been seen yet, or when the step's last bucket
  // (is_last) shows that a selected or grouped index is past the last
  // parameter.
  void select(const ddph_bucket_t& bucket, std::vector<char>* selected,
              std::vector<uint32_t>* group);

 private:
  // *index = the parameters' indices (ids, or positions over the buckets).
  void index_by_position(const ddph_bucket_t& bucket, std::vector<uint64_t>* index);
  // The option that makes indices matter, for errors.
  const char* option() const { return indices_.empty() ? "param_groups" : "params"; }
  bool by_index() const { return !indices_.empty() || !group_of_.empty(); }
  enum class Keys { kUnknown, kIds, kPositions };
  std::vector<size_t> indices_;
  std::map<uint64_t, uint32_t> group_of_;  // index -> group + 1
  std::vector<uint64_t> index_;            // per-bucket scratch
  Keys keys_ = Keys::kUnknown;
  std::map<uint64_t, size_t> counts_;  // bucket index -> number of params
};

}  // namespace optimizer_overlap
}  // namespace ddph
