// The optimizer state blob: the state of every parameter an optimizer hook
// has updated (hook_then_optimizer's checkpoint, and what the zero family's
// shards consolidate into), keyed by the host's parameter id (ddph_bucket_t.param_ids,
// ABI 1.2) or, for a host that gives none, by (bucket index, position in
// the bucket).
//
// The blob, little-endian whatever the host:
//   "DDPHOPTM"  8 bytes magic
//   u32         version (kStateVersion; version 1, which had no key kind
//               and only positions, still loads)
//   u32         optimizer: 0 sgd, 1 adam, 2 adamw
//   u32         parameter count
//   per parameter, ascending key:
//               u8 key kind (version 2 only): 0 position, 1 id
//               position: u64 bucket index, u32 position; id: u64 id
//               then u64 step,
//               momentum (sgd momentum_buffer / adam exp_avg), second
//               (exp_avg_sq), max_second (max_exp_avg_sq), each as
//               u64 length + length x f32 (IEEE-754 bits); length 0: absent
//   u64         FNV-1a 64 of every byte before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "core/optim/functional_optim.h"

namespace ddph {
namespace optim {

// Where a parameter's state is kept: by the host's id when it gives one
// (the state then follows the parameter when the host regroups its
// buckets), else by (bucket index, position).
struct ParamKey {
  bool by_id;
  uint64_t id_or_bucket;        // the id (as unsigned), or the bucket index
  uint32_t position_in_bucket;  // 0 for an id
  static ParamKey id(int64_t id) { return {true, uint64_t(id), 0}; }
  static ParamKey position(uint64_t bucket, uint32_t i) { return {false, bucket, i}; }
  bool operator<(const ParamKey& o) const {
    return std::tie(by_id, id_or_bucket, position_in_bucket) <
           std::tie(o.by_id, o.id_or_bucket, o.position_in_bucket);
  }
};
using StateMap = std::map<ParamKey, ParamState>;

// "parameter id 3", or "parameter 1 of bucket 0": a key in messages.
std::string key_text(const ParamKey& key);  // ordered: the blob is deterministic

constexpr uint32_t kStateVersion = 2;

std::string encode_state(const StateMap& states, OptimKind kind);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic, version or checksum, an
// optimizer other than `kind`, truncation, trailing bytes or a repeated key.
StateMap decode_state(const void* bytes, size_t n, OptimKind kind);

}  // namespace optim
}  // namespace ddph
