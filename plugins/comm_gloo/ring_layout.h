// The geometry of the allreduce ring (ring_allreduce.cpp): which elements
// form each segment and chunk, and so in which order the ring combines
// every element. The small-buffer allreduce (small_allreduce.cpp) follows
// the same order without the ring.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

namespace ddph {
namespace comm_gloo {

inline int wrap_rank(int a, int world) {
  return ((a % world) + world) % world;
}

// gloo::allreduce's segmentation, as Debian's gloo (2022) has it in
// gloo/allreduce.cc: the number of segments first (enough for segments of
// at most kSegmentBytes, at least two per rank, the same number for every
// rank), then their size, so a segment is usually below kSegmentBytes. Older
// gloo fixed the size first; the two agree only up to two segments a rank
// (gloo_reference_test.cpp runs both regimes against the installed gloo).
// Chunk c is segments [c * per_chunk, (c + 1) * per_chunk).
class RingLayout {
 public:
  static constexpr size_t kSegmentBytes = size_t(1) << 20;

  RingLayout(size_t numel, int world, size_t elem_size) : numel_(numel), world_(world) {
    const size_t total = numel * elem_size, w = size_t(world);
    const size_t max_seg = elem_size * std::max<size_t>(1, kSegmentBytes / elem_size);
    const size_t segments = round_up(std::max((total + max_seg - 1) / max_seg, 2 * w), w);
    const size_t seg_bytes = round_up((total + segments - 1) / segments, elem_size);
    seg_ = seg_bytes / elem_size;
    per_chunk_ = segments / w;
  }
  // The ring of a reduce-scatter: chunk c is block c of numel / world
  // elements (numel a multiple of world), the blocks the caller asked for,
  // each in segments of at most kSegmentBytes, at least two.
  static RingLayout blocks(size_t numel, int world, size_t elem_size) {
    RingLayout l;
    l.numel_ = numel;
    l.world_ = world;
    l.block_ = numel / size_t(world);
    const size_t max_seg = std::max<size_t>(1, kSegmentBytes / elem_size);
    l.per_chunk_ = std::max<size_t>(2, (l.block_ + max_seg - 1) / max_seg);
    l.seg_ = std::max<size_t>(1, (l.block_ + l.per_chunk_ - 1) / l.per_chunk_);
    return l;
  }
  size_t segment_elems() const { return seg_; }
  size_t steps() const { return size_t(world_ - 1) * per_chunk_; }
  size_t per_chunk() const { return per_chunk_; }
  // Element range [first, second) of segment j of chunk c; empty past the
  // end of the buffer.
  std::pair<size_t, size_t> segment(size_t chunk, size_t j) const {
    if (block_ > 0) {
      const size_t end = (chunk + 1) * block_;
      const size_t b = std::min(end, chunk * block_ + j * seg_);
      return {b, std::min(end, b + seg_)};
    }
    const size_t b = std::min(numel_, (chunk * per_chunk_ + j) * seg_);
    return {b, std::min(numel_, b + seg_)};
  }
  // The segment that step t handles in chunk (base + t / per_chunk).
  std::pair<size_t, size_t> at(int base, size_t t) const {
    return segment(size_t(wrap_rank(base + int(t / per_chunk_), world_)), t % per_chunk_);
  }

 private:
  RingLayout() = default;
  static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

  size_t numel_ = 0;
  int world_ = 1;
  size_t seg_ = 0, per_chunk_ = 0;
  size_t block_ = 0;  // blocks(): each chunk's elements; 0: gloo's geometry
};

}  // namespace comm_gloo
}  // namespace ddph
