#include "plugins/zero/layout.h"

#include <algorithm>

#include "core/base/le_bytes.h"
#include "core/hook/hook.h"
#include "core/hook/param_view.h"

namespace ddph {
namespace zero {

bool BucketLayout::operator==(const BucketLayout& o) const {
  if (index != o.index || n != o.n || offsets != o.offsets || numels != o.numels) return false;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] < o.keys[i] || o.keys[i] < keys[i]) return false;
  return true;
}

BucketLayout layout_of(const ddph_bucket_t& bucket) {
  BucketLayout l;
  l.index = bucket.index;
  l.n = size_t(bucket.buffer.shape[0]);
  const int64_t* ids = param_ids(bucket);
  for (size_t i = 0; i < bucket.num_params; ++i) {
    l.keys.push_back(ids != nullptr ? optim::ParamKey::id(ids[i])
                                    : optim::ParamKey::position(bucket.index, uint32_t(i)));
    l.offsets.push_back(size_t(bucket.params[i].offset));
    l.numels.push_back(size_t(view_numel(bucket.params[i])));
  }
  return l;
}

namespace {

void put_layout(LeWriter& w, const BucketLayout& l) {
  w.put(l.index, 8);
  w.put(l.n, 8);
  w.put(l.keys.size(), 8);
  for (size_t i = 0; i < l.keys.size(); ++i) {
    w.put(l.keys[i].by_id ? 1 : 0, 1);
    w.put(l.keys[i].id_or_bucket, 8);
    w.put(l.keys[i].position_in_bucket, 4);
    w.put(l.offsets[i], 8);
    w.put(l.numels[i], 8);
  }
}

}  // namespace

uint64_t layout_hash(const BucketLayout& layout) {
  LeWriter w;
  put_layout(w, layout);
  return fnv1a64(w.bytes().data(), w.bytes().size());
}

uint64_t layouts_hash(const std::vector<const BucketLayout*>& layouts, int world, int protocol) {
  LeWriter w;
  w.put(uint64_t(world), 4);
  w.put(uint64_t(protocol), 4);
  for (const BucketLayout* l : layouts) put_layout(w, *l);
  return fnv1a64(w.bytes().data(), w.bytes().size());
}

size_t block_width(size_t n, int world) {
  return n / size_t(world);
}

Range rank_range(size_t n, int world, int rank) {
  const size_t width = block_width(n, world);
  const size_t begin = width * size_t(rank);
  return {begin, rank == world - 1 ? n - begin : width};
}

std::vector<Piece> range_pieces(const BucketLayout& layout, int world) {
  std::vector<Piece> pieces;
  for (int r = 0; r < world; ++r) {
    const Range range = rank_range(layout.n, world, r);
    for (size_t i = 0; i < layout.keys.size(); ++i) {
      const size_t first = std::max(range.begin, layout.offsets[i]);
      const size_t last = std::min(range.begin + range.count, layout.offsets[i] + layout.numels[i]);
      if (first < last) pieces.push_back({i, first - layout.offsets[i], last - first, r});
    }
  }
  return pieces;
}

std::vector<Piece> share_pieces(const BucketLayout& layout, const std::vector<Share>& shares) {
  std::vector<Piece> pieces;
  for (const Share& s : shares)
    for (size_t i = s.first; i < s.first + s.count; ++i)
      pieces.push_back({i, 0, layout.numels[i], s.rank});
  return pieces;
}

Range owned_span(const BucketLayout& layout, const std::vector<Piece>& pieces, int rank) {
  size_t first = layout.n, last = 0;
  for (const Piece& p : pieces) {
    if (p.rank != rank) continue;
    first = std::min(first, layout.offsets[p.param] + p.begin);
    last = std::max(last, layout.offsets[p.param] + p.begin + p.count);
  }
  return first < last ? Range{first, last - first} : Range{0, 0};
}

}  // namespace zero
}  // namespace ddph
