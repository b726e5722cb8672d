#include "loader/state_blob.h"

#include <cstring>

#include "core/error.h"

namespace ddph {
namespace loader {
namespace {

const char kMagic[8] = {'D', 'D', 'P', 'H', 'S', 'T', 'A', 'T'};

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

class Reader {
 public:
  Reader(const unsigned char* p, size_t n) : p_(p), n_(n) {}
  uint64_t get(int bytes, const char* what) {
    need(size_t(bytes), what);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(p_[pos_ + i]) << (8 * i);
    pos_ += bytes;
    return v;
  }
  std::string take(uint64_t len, const char* what) {
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  size_t left() const { return n_ - pos_; }

 private:
  void need(uint64_t len, const char* what) {
    DDPH_CHECK(len <= n_ - pos_, DDPH_INVALID_ARGUMENT,
               "state blob is truncated: " << what << " needs " << len << " bytes at offset "
                                           << pos_ << ", but only " << (n_ - pos_) << " remain");
  }
  const unsigned char* p_;
  size_t n_, pos_ = 0;
};

}  // namespace

std::string encode_state(const std::vector<StateRecord>& records) {
  std::string out(kMagic, sizeof kMagic);
  put(out, kStateFormatVersion, 4);
  put(out, records.size(), 4);
  for (const auto& r : records) {
    put(out, r.family.size(), 4);
    out += r.family;
    put(out, r.hook.size(), 4);
    out += r.hook;
    put(out, r.blob.size(), 8);
    out += r.blob;
  }
  return out;
}

std::vector<StateRecord> decode_state(const void* bytes, size_t n) {
  DDPH_CHECK(bytes != nullptr || n == 0, DDPH_INVALID_ARGUMENT, "load_state: bytes is NULL");
  DDPH_CHECK(n >= sizeof kMagic && std::memcmp(bytes, kMagic, sizeof kMagic) == 0,
             DDPH_INVALID_ARGUMENT,
             "not a ddphooks state blob (the magic \"DDPHSTAT\" is missing)");
  Reader in(static_cast<const unsigned char*>(bytes) + sizeof kMagic, n - sizeof kMagic);
  uint64_t version = in.get(4, "the format version");
  DDPH_CHECK(version == kStateFormatVersion, DDPH_INVALID_ARGUMENT,
             "state blob has format version " << version << "; this loader reads version "
                                              << kStateFormatVersion);
  uint64_t count = in.get(4, "the record count");
  std::vector<StateRecord> records;
  for (uint64_t i = 0; i < count; ++i) {
    StateRecord r;
    r.family = in.take(in.get(4, "a family length"), "a family name");
    r.hook = in.take(in.get(4, "a hook name length"), "a hook name");
    r.blob = in.take(in.get(8, "a hook state length"), "a hook state");
    records.push_back(std::move(r));
  }
  DDPH_CHECK(in.left() == 0, DDPH_INVALID_ARGUMENT,
             "state blob has " << in.left() << " unexpected bytes after its last record");
  return records;
}

}  // namespace loader
}  // namespace ddph
