// A zero hook's checkpoint: the optimizer state of the pieces this rank
// steps, and the layout they were cut from. Shards of all ranks, joined
// back to back in any order, are the consolidated state, which loads at any
// world size; so does a full optimizer state blob (core/optim/state_blob.h,
// hook_then_optimizer's checkpoint), since every piece is a slice of a
// parameter's state.
//
// One shard, little-endian:
//   "DDPHZERO"  8 bytes magic
//   u32         version (kShardVersion; versions 1, without the residuals,
//               and 2, without the run id, still load)
//   u64         length of this shard in bytes, checksum included (so that
//               joined shards can be told apart)
//   u32         optimizer: 0 sgd, 1 adam, 2 adamw
//   u32         world size, u32 rank of the saver
//   u64         layout hash (layouts_hash; 0 before the first step's end)
//   u64         run id (version 3 on; 0 before the first step's end): the
//               same on every rank of one run, so shards of different runs
//               are refused when joined or loaded
//   u32         piece count
//   per piece, ascending key:
//               u8 key kind (0 position, 1 id), u64 id or bucket index,
//               u32 position (0 for an id), u64 first element within the
//               parameter, u64 element count, u64 step, then momentum,
//               second and max_second as u64 length + length x f32
//   u32         residual count (version 2 on)
//   per residual, ascending bucket index: u64 bucket index, then the
//               saver's error feedback for the whole bucket (bits 8 or 4)
//               as u64 length + length x f32
//   u64         FNV-1a 64 of every byte before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/optim/state_blob.h"

namespace ddph {
namespace zero {

constexpr uint32_t kShardVersion = 3;

// A piece's state is found by its parameter and its first element.
struct PieceKey {
  optim::ParamKey param;
  uint64_t begin;
  bool operator<(const PieceKey& o) const {
    if (param < o.param) return true;
    if (o.param < param) return false;
    return begin < o.begin;
  }
};

struct PieceState {
  uint64_t count = 0;  // elements; each non-empty buffer has this length
  optim::ParamState state;
};
using PieceMap = std::map<PieceKey, PieceState>;

struct Shard {
  optim::OptimKind kind = optim::OptimKind::kSgd;
  uint32_t world = 1, rank = 0;
  uint64_t layout_hash = 0;
  uint64_t run_id = 0;  // 0: unknown (saved before the first step, or version 1 or 2)
  PieceMap pieces;
  // The saver's own error feedback per bucket index (protocol
  // reduce_scatter with bits 8 or 4): a rank's, not a slice of anything,
  // so it resumes on the same rank of the same world only.
  std::map<uint64_t, std::vector<float>> residuals;
};

std::string encode_shard(const Shard& shard);

// A run id as messages print it: 16 hex digits.
std::string run_id_text(uint64_t run_id);

// What load_state was given.
struct LoadedState {
  // One shard: this rank's (or another rank's) alone.
  bool single_shard = false;
  Shard shard;  // single_shard: the shard
  // Otherwise every parameter's whole state, from joined shards or a full
  // state blob.
  optim::StateMap full;
  // The run the shards came from (0: unknown, or a full state blob).
  uint64_t run_id = 0;
};

// Reads one shard, every rank's shards joined, or a full state blob.
// Throws DDPH_INVALID_ARGUMENT naming the problem and `who` for a corrupt
// blob, an optimizer other than `kind`, joined shards of different worlds,
// layouts, runs or optimizers, a rank missing or twice, or a parameter
// whose pieces do not tile it.
LoadedState decode_loaded(const void* bytes, size_t n, optim::OptimKind kind, const char* who);

// Every parameter's whole state from the pieces of `shards`; throws
// DDPH_INVALID_ARGUMENT naming `who` when a parameter's pieces do not tile
// it from element 0, or come from different steps.
optim::StateMap join_pieces(const std::vector<Shard>& shards, const char* who);

// One shard, checked alone (nothing checks that it belongs with others).
Shard decode_shard(const void* bytes, size_t n, optim::OptimKind kind, const char* who);

// The state of elements [begin, begin + count) of a parameter's whole
// state; throws DDPH_INVALID_ARGUMENT when the parameter's buffers are not
// `numel` long (a checkpoint of another model).
PieceState slice_state(const optim::ParamState& whole, size_t numel, size_t begin, size_t count,
                       const char* who);

}  // namespace zero
}  // namespace ddph
