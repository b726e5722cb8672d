// What a zero hook knows of a bucket, and which rank steps which elements of
// it. Every rank computes the same pieces from the same layouts, so no
// ownership is ever sent; the layouts themselves are compared across ranks
// once (sharding_plan.h), so that ranks that disagree fail instead of
// stepping different parameters.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/optim/state_blob.h"
#include "plugins/zero/assignment.h"

namespace ddph {
namespace zero {

// One bucket's parameters: their keys (the host's ids, else positions),
// element offsets in the buffer and element counts.
struct BucketLayout {
  uint64_t index = 0;
  size_t n = 0;  // buffer elements
  std::vector<optim::ParamKey> keys;
  std::vector<size_t> offsets, numels;
  bool operator==(const BucketLayout& o) const;
  bool operator!=(const BucketLayout& o) const { return !(*this == o); }
};

BucketLayout layout_of(const ddph_bucket_t& bucket);

// FNV-1a 64 over a layout's fields, little-endian: the same on every rank
// for the same layout.
uint64_t layout_hash(const BucketLayout& layout);
// Over several, in order, with the world size and the protocol's number.
uint64_t layouts_hash(const std::vector<const BucketLayout*>& layouts, int world, int protocol);

// Elements begin .. begin + count - 1 of parameter `param` (a position in
// the bucket), stepped by `rank`.
struct Piece {
  size_t param;
  size_t begin;
  size_t count;
  int rank;
};

// The element range [begin, begin + count) of an n-element bucket that
// `rank` owns under protocol reduce_scatter: floor(n / world) elements
// each, the communicator's reduce-scatter blocks, and the last rank also the
// n mod world left over.
struct Range {
  size_t begin, count;
};
Range rank_range(size_t n, int world, int rank);
size_t block_width(size_t n, int world);  // floor(n / world)

// reduce_scatter: each parameter cut where the rank ranges cut it.
std::vector<Piece> range_pieces(const BucketLayout& layout, int world);

// allreduce: whole parameters, as the shares of this bucket assign them.
std::vector<Piece> share_pieces(const BucketLayout& layout, const std::vector<Share>& shares);

// The elements of the bucket that `rank`'s pieces cover, as one range
// (a rank's pieces of a bucket are always contiguous); count 0 if none.
Range owned_span(const BucketLayout& layout, const std::vector<Piece>& pieces, int rank);

}  // namespace zero
}  // namespace ddph
