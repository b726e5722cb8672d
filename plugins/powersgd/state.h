// What a powersgd hook remembers between steps, and its checkpoint format.
// docs/powersgd.md documents the format for tools (and tests) that write a
// chosen initial Q.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plugins/powersgd/torch_rng.h"

namespace ddph {
namespace powersgd {

// What a checkpoint holds of one bucket index: PyTorch's p_memory_dict,
// q_memory_dict and error_dict entries, on the host. An empty error means
// "absent"; P and Q are present when has_pq is set, even if empty (a bucket
// with nothing to compress still draws its fresh Q's seed only once under
// warm start, as in PyTorch).
struct SavedBucket {
  bool has_pq = false;
  std::vector<float> p, q, error;
};

enum class HookKind : uint32_t { kLayerwise = 0, kBatched = 1 };

struct PsgdState {
  uint64_t iter = 0;  // PyTorch's state.iter: steps completed (buckets with is_last)
  Mt19937 rng;        // numpy's RandomState(seed), the source of each fresh Q's seed
  std::map<uint64_t, SavedBucket> buckets;  // ordered: the blob does not depend on hash order
};

// The blob, little-endian whatever the host:
//   "DDPHPSGD"   8 bytes magic
//   u32          version (kStateVersion)
//   u32          hook kind: 0 powersgd, 1 batched_powersgd
//   u64          iter
//   u32          rng position (0..624), then 624 x u32 rng words (MT19937 state)
//   u32          bucket count
//   per bucket, ascending index:
//                u64 index; u8 flags (bit 0: P and Q present); then P, Q,
//                error, each as u64 length + length x f32 (IEEE-754 bits as u32)
//   u64          FNV-1a 64 of every byte before it
constexpr uint32_t kStateVersion = 1;
std::string encode_state(const PsgdState& state, HookKind kind);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic, version or hook kind, a bad
// checksum, truncation, trailing bytes, a repeated bucket index or an rng
// position out of range. Decodes completely before returning.
PsgdState decode_state(const void* bytes, size_t n, HookKind kind);

}  // namespace powersgd
}  // namespace ddph
