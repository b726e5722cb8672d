// hook_then_optimizer's checkpoint: the optimizer state of every parameter
// it has updated, keyed by (bucket index, position in the bucket).
//
// The blob, little-endian whatever the host:
//   "DDPHOPTM"  8 bytes magic
//   u32         version (kStateVersion)
//   u32         optimizer: 0 sgd, 1 adam, 2 adamw
//   u32         parameter count
//   per parameter, ascending key:
//               u64 bucket index, u32 position, u64 step, then
//               momentum (sgd momentum_buffer / adam exp_avg), second
//               (exp_avg_sq), max_second (max_exp_avg_sq), each as
//               u64 length + length x f32 (IEEE-754 bits); length 0: absent
//   u64         FNV-1a 64 of every byte before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "plugins/optimizer_overlap/functional_optim.h"

namespace ddph {
namespace optimizer_overlap {

using ParamKey = std::pair<uint64_t, uint32_t>;   // (bucket index, position)
using StateMap = std::map<ParamKey, ParamState>;  // ordered: the blob is deterministic

constexpr uint32_t kStateVersion = 1;

std::string encode_state(const StateMap& states, OptimKind kind);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic, version or checksum, an
// optimizer other than `kind`, truncation, trailing bytes or a repeated key.
StateMap decode_state(const void* bytes, size_t n, OptimKind kind);

}  // namespace optimizer_overlap
}  // namespace ddph
