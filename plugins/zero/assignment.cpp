#include "plugins/zero/assignment.h"

#include <algorithm>
#include <numeric>

#include "core/base/error.h"

namespace ddph {
namespace zero {
namespace {

constexpr const char* kWho = "zero";

size_t sum(const std::vector<size_t>& v) {
  return std::accumulate(v.begin(), v.end(), size_t(0));
}

// PyTorch's _get_min_index: the first rank with the smallest size, skipping
// the ranks that already hold a piece of this bucket.
int least_loaded(const std::vector<size_t>& size_per_rank, const std::vector<bool>& taken,
                 uint64_t bucket) {
  int best = -1;
  for (size_t r = 0; r < size_per_rank.size(); ++r)
    if (!taken[r] && (best < 0 || size_per_rank[r] < size_per_rank[size_t(best)])) best = int(r);
  DDPH_CHECK(best >= 0, DDPH_INVALID_ARGUMENT,
             kWho << ": shard_buckets cuts bucket " << bucket << " into more pieces than the "
                  << size_per_rank.size()
                  << " ranks can hold (its parameters alternate between small and about "
                     "1/world of the model); use shard_buckets: false");
  return best;
}

}  // namespace

std::vector<Share> assign_buckets(const std::vector<std::vector<size_t>>& numels, int world,
                                  bool shard_buckets) {
  DDPH_CHECK(world >= 1, DDPH_INVALID_ARGUMENT, kWho << ": world size " << world << " is below 1");
  for (size_t b = 0; b < numels.size(); ++b)
    DDPH_CHECK(!numels[b].empty(), DDPH_INVALID_ARGUMENT,
               kWho << ": bucket " << b
                    << " has no parameters; every bucket must lend its "
                       "parameters (ddph_bucket_t.params)");
  std::vector<Share> shares;
  if (!shard_buckets) {
    for (size_t b = 0; b < numels.size(); ++b)
      shares.push_back(Share{b, 0, numels[b].size(), int(b % size_t(world))});
    return shares;
  }
  size_t total = 0;
  for (const auto& bucket : numels) total += sum(bucket);
  // Python's total_size / world_size: a correctly rounded double, compared
  // with exact integers (sizes stay far below 2^53).
  const double threshold = double(total) / double(world);
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sum(numels[a]) < sum(numels[b]); });
  std::vector<size_t> size_per_rank(size_t(world), 0);
  for (size_t b : order) {
    const std::vector<size_t>& params = numels[b];
    std::vector<bool> taken(size_t(world), false);
    size_t first = 0, piece = 0;
    auto assign = [&](size_t end) {
      const int rank = least_loaded(size_per_rank, taken, b);
      shares.push_back(Share{b, first, end - first, rank});
      taken[size_t(rank)] = true;
      size_per_rank[size_t(rank)] += piece;
    };
    for (size_t i = 0; i < params.size(); ++i) {
      if (double(piece + params[i]) >= threshold && i > first) {
        assign(i);
        first = i;
        piece = 0;
      }
      piece += params[i];
    }
    assign(params.size());  // the rest: no piece spans two buckets
  }
  return shares;
}

}  // namespace zero
}  // namespace ddph
