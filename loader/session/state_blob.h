// The container format of ddph_session_save_state: a header, then one record
// per stateful hook of the session, in core's checksummed frame
// (core/base/le_bytes.h), so that a flip in a record's family, name or length is
// refused as corruption, never read as another hook or another length, and
// the blob of a hook without a checksum of its own is covered too.
// Portable: fixed little-endian integers.
//
//   "DDPHSTAT"  8 bytes magic
//   u32         format version (kStateFormatVersion; 1 had no checksum)
//   u32         record count
//   per record: u32 family length, family bytes,
//               u32 hook name length, name bytes,
//               u64 blob length, the hook's own blob
//   u64         FNV-1a 64 of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddph {
namespace loader {

constexpr uint32_t kStateFormatVersion = 2;

struct StateRecord {
  std::string family;
  std::string hook;
  std::string blob;  // bytes, not text
};

std::string encode_state(const std::vector<StateRecord>& records);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic or version, a checksum
// mismatch, truncation or trailing bytes.
std::vector<StateRecord> decode_state(const void* bytes, size_t n);

}  // namespace loader
}  // namespace ddph
