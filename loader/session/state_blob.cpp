#include "loader/session/state_blob.h"

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace loader {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'S', 'T', 'A', 'T'};
constexpr const char* kBlob = "state blob";

void put_text(LeWriter& w, const std::string& s, int length_bytes) {
  w.put(s.size(), length_bytes);
  w.put_bytes(s.data(), s.size());
}

std::string take_text(LeReader& in, int length_bytes, const char* length, const char* what) {
  const uint64_t n = in.get(length_bytes, length);
  DDPH_CHECK(n <= in.left(), DDPH_INVALID_ARGUMENT,
             kBlob << ": truncated: " << what << " of " << n << " bytes claimed, " << in.left()
                   << " bytes left");
  return std::string(reinterpret_cast<const char*>(in.take(size_t(n), what)), size_t(n));
}

}  // namespace

std::string encode_state(const std::vector<StateRecord>& records) {
  LeWriter w;
  put_frame_header(w, kMagic, kStateFormatVersion);
  w.put(records.size(), 4);
  for (const auto& r : records) {
    put_text(w, r.family, 4);
    put_text(w, r.hook, 4);
    put_text(w, r.blob, 8);
  }
  return finish_frame(w);
}

std::vector<StateRecord> decode_state(const void* bytes, size_t n) {
  DDPH_CHECK(bytes != nullptr || n == 0, DDPH_INVALID_ARGUMENT, "load_state: bytes is NULL");
  // Magic, version and checksum before any record: a flipped bit in a
  // record's header is refused as corruption, not read as another hook.
  LeReader in = open_frame(bytes, n, kMagic, kStateFormatVersion, kBlob, "ddph_session_save_state");
  const uint64_t count = in.get(4, "the record count");
  std::vector<StateRecord> records;
  for (uint64_t i = 0; i < count; ++i) {
    StateRecord r;
    r.family = take_text(in, 4, "a family length", "a family name");
    r.hook = take_text(in, 4, "a hook name length", "a hook name");
    r.blob = take_text(in, 8, "a hook state length", "a hook state");
    records.push_back(std::move(r));
  }
  DDPH_CHECK(in.left() == 0, DDPH_INVALID_ARGUMENT,
             kBlob << " has " << in.left() << " unexpected bytes after its last record");
  return records;
}

}  // namespace loader
}  // namespace ddph
