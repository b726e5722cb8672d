#include "core/quant/chunking.h"

#include <algorithm>

namespace ddph {
namespace quantization {

std::vector<Chunk> split_chunks(size_t n, size_t channel_size, int world) {
  const size_t w = size_t(world);
  // Cut in units of `unit` elements: whole channels, or single elements when
  // each chunk is its own channel.
  const size_t unit = channel_size != 0 ? channel_size : 1;
  const size_t units = (n + unit - 1) / unit;
  std::vector<Chunk> chunks(w);
  for (size_t j = 0; j < w; ++j) {
    const size_t b = std::min(n, units * j / w * unit);
    const size_t e = std::min(n, units * (j + 1) / w * unit);
    chunks[j].begin = b;
    chunks[j].seg.n = e - b;
    chunks[j].seg.channel = channel_size != 0 ? channel_size : e - b;
  }
  return chunks;
}

std::vector<Chunk> split_pieces(const Chunk& c, size_t channel_size, size_t parts) {
  std::vector<Chunk> pieces = split_chunks(c.seg.n, channel_size, int(parts));
  for (Chunk& p : pieces) p.begin += c.begin;
  return pieces;
}

}  // namespace quantization
}  // namespace ddph
