// How protocol reduce_scatter cuts a bucket among the ranks: world-size
// contiguous chunks made of whole channels, balanced to within one channel.
#pragma once

#include <cstddef>
#include <vector>

#include "core/quant/wire_segment.h"

namespace ddph {
namespace quantization {

struct Chunk {
  size_t begin = 0;  // first element in the bucket
  Segment seg;       // its length and channel size
};

// channel_size 0 (per_tensor): each chunk is one channel of its own length,
// so each chunk gets its own scale. A chunk may be empty when the bucket has
// fewer channels than there are ranks.
std::vector<Chunk> split_chunks(size_t n, size_t channel_size, int world);

// Chunk c cut the same way into `parts` pieces of whole channels (per_channel
// only: channel_size > 0, so that every channel keeps its scale and a piece's
// codes are the codes the whole chunk would have).
std::vector<Chunk> split_pieces(const Chunk& c, size_t channel_size, size_t parts);

}  // namespace quantization
}  // namespace ddph
