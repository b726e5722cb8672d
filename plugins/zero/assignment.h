// Which rank steps which parameters of each bucket, as PyTorch's
// ZeroRedundancyOptimizer(overlap_with_ddp=True) assigns them
// (zero_redundancy_optimizer.py, _bucket_assignments_per_rank in 1.13), so
// a zero hook's ranks own what PyTorch's would:
// - whole buckets: bucket b goes to rank b % world;
// - shard_buckets: buckets in ascending size (ties in index order), each cut
//   before the parameter that would bring its piece to total / world
//   elements, every piece to the rank with the fewest elements so far
//   (lowest rank on ties) that does not hold a piece of that bucket yet.
// Every rank computes the same answer from the same layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddph {
namespace zero {

// Parameters first .. first + count - 1 of bucket `bucket` (positions in the
// bucket's parameter order), stepped by `rank`.
struct Share {
  uint64_t bucket;
  size_t first;
  size_t count;
  int rank;
};

// numels[b][i] = element count of parameter i of bucket b (buckets in index
// order). Shares come in PyTorch's order of assignment. Throws
// DDPH_INVALID_ARGUMENT for a world below 1, an empty bucket, or (with
// shard_buckets) a bucket that would need more pieces than there are ranks,
// which PyTorch's assignment cannot place either.
std::vector<Share> assign_buckets(const std::vector<std::vector<size_t>>& numels, int world,
                                  bool shard_buckets);

}  // namespace zero
}  // namespace ddph
