// The container format of ddph_session_save_state: a header, then one record
// per stateful hook of the session. Portable: fixed little-endian integers.
//
//   "DDPHSTAT"  8 bytes magic
//   u32         format version (kStateFormatVersion)
//   u32         record count
//   per record: u32 family length, family bytes,
//               u32 hook name length, name bytes,
//               u64 blob length, the hook's own blob
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddph {
namespace loader {

constexpr uint32_t kStateFormatVersion = 1;

struct StateRecord {
  std::string family;
  std::string hook;
  std::string blob;  // bytes, not text
};

std::string encode_state(const std::vector<StateRecord>& records);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic or version, or truncation.
std::vector<StateRecord> decode_state(const void* bytes, size_t n);

}  // namespace loader
}  // namespace ddph
