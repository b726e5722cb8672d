// How the CUDA kernels split a bucket: every block works inside one channel,
// on at most kTile elements of it. A block thus loads its channel's QParams
// once and never divides an element index by the channel length, and a
// whole-tensor "channel" (per_tensor) still spreads over many blocks.
// Internal to the .cu files; only nvcc sees it.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>

namespace ddph {
namespace quantization {
namespace tiles {

constexpr int kThreads = 256;
constexpr size_t kTile = 8 * kThreads;  // 8 elements a thread: enough work per block

struct Tiles {
  size_t n = 0;
  size_t channel = 0;            // resolved: 0 in the API means the whole bucket
  size_t tiles_per_channel = 1;  // blocks on one channel
  size_t blocks = 0;             // 0 when n == 0: launch nothing
};

inline Tiles make_tiles(size_t n, size_t channel) {
  Tiles t;
  t.n = n;
  t.channel = channel == 0 ? n : channel;
  if (n == 0) return t;
  t.tiles_per_channel = (t.channel + kTile - 1) / kTile;
  t.blocks = (n + t.channel - 1) / t.channel * t.tiles_per_channel;
  return t;
}

// The grid of a launch over t: one block per tile up to a cap, past which
// each block loops over tiles grid_blocks apart (channel_size 1 on a bucket
// of 2^31 elements is 2^31 tiles, more than gridDim.x may be).
constexpr size_t kMaxGridBlocks = size_t(1) << 20;
inline unsigned grid_blocks(const Tiles& t) {
  return unsigned(t.blocks < kMaxGridBlocks ? t.blocks : kMaxGridBlocks);
}

// Elements [begin, end) of channel c for this block; begin >= end when the
// block lies past the end of a short last channel.
struct Range {
  size_t c, begin, end;
};

// (Host-callable too, so the split can be checked without a GPU.)
__host__ __device__ inline Range tile_range(const Tiles& t, size_t b) {
  Range r;
  r.c = b / t.tiles_per_channel;
  const size_t channel_begin = r.c * t.channel;
  r.begin = channel_begin + (b % t.tiles_per_channel) * kTile;
  size_t end = r.begin + kTile;
  if (end > channel_begin + t.channel) end = channel_begin + t.channel;
  r.end = end < t.n ? end : t.n;
  return r;
}

// Blocks for a grid-stride loop over n items; capped, the loop covers the rest.
inline unsigned stride_blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65536 ? b : 65536);
}

}  // namespace tiles
}  // namespace quantization
}  // namespace ddph
