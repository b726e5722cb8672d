// The `params` option: which parameters hook_then_optimizer updates.
//
// PyTorch names them by tensor; across the C ABI a parameter is a position
// in a bucket. Indices here count parameters over the buckets in bucket
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
  // indices ascending and unique; empty selects every parameter.
  explicit ParamSelection(std::vector<size_t> indices) : indices_(std::move(indices)) {}

  // selected->at(i) = whether bucket.params[i] is updated. Throws
  // DDPH_INVALID_ARGUMENT when the bucket's parameter count differs from
  // an earlier step's, or, with a selection, when a lower bucket index has
  // not been seen yet, or when the step's last bucket (is_last) shows that
  // a selected index is past the last parameter.
  void select(const ddph_bucket_t& bucket, std::vector<char>* selected);

 private:
  std::vector<size_t> indices_;
  std::map<uint64_t, size_t> counts_;  // bucket index -> number of params
};

}  // namespace optimizer_overlap
}  // namespace ddph
