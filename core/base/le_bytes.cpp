#include "core/base/le_bytes.h"

#include <cstring>

#include "core/base/error.h"

namespace ddph {

void LeWriter::put(uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(char(uint8_t(v >> (8 * i))));
}

void LeWriter::put_bytes(const void* bytes, size_t n) {
  out_.append(static_cast<const char*>(bytes), n);
}

void LeWriter::put_floats(const std::vector<float>& v) {
  put(v.size(), 8);
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put(bits, 4);
  }
}

void LeWriter::put_double(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put(bits, 8);
}

LeReader::LeReader(const void* bytes, size_t n, const char* blob)
    : p_(static_cast<const uint8_t*>(bytes)), n_(n), blob_(blob) {}

void LeReader::need(size_t bytes, const char* field) const {
  DDPH_CHECK(
      bytes <= n_ - pos_, DDPH_INVALID_ARGUMENT,
      blob_ << ": blob truncated at byte " << pos_ << " of " << n_ << " while reading " << field);
}

uint64_t LeReader::get(int bytes, const char* field) {
  need(size_t(bytes), field);
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p_[pos_ + size_t(i)]) << (8 * i);
  pos_ += size_t(bytes);
  return v;
}

const uint8_t* LeReader::take(size_t bytes, const char* field) {
  need(bytes, field);
  const uint8_t* p = p_ + pos_;
  pos_ += bytes;
  return p;
}

double LeReader::get_double(const char* field) {
  const uint64_t bits = get(8, field);
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

std::vector<float> LeReader::get_floats(const char* field) {
  const uint64_t count = get(8, field);
  DDPH_CHECK(count <= left() / 4, DDPH_INVALID_ARGUMENT,
             blob_ << ": blob truncated: " << count << " floats of " << field << " claimed, "
                   << left() << " bytes left");
  std::vector<float> v(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t bits = uint32_t(get(4, field));
    std::memcpy(&v[i], &bits, 4);
  }
  return v;
}

uint64_t fnv1a64(const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void put_frame_header(LeWriter& w, const char (&magic)[8], uint32_t version) {
  for (char c : magic) w.put(uint8_t(c), 1);
  w.put(version, 4);
}

std::string finish_frame(LeWriter& w) {
  w.put(fnv1a64(w.bytes().data(), w.bytes().size()), 8);
  return w.take();
}

LeReader open_frame(const void* bytes, size_t n, const char (&magic)[8], uint32_t version,
                    const char* blob, const char* saver) {
  uint32_t got = 0;
  return open_frame(bytes, n, magic, version, version, blob, saver, &got);
}

LeReader open_frame(const void* bytes, size_t n, const char (&magic)[8], uint32_t oldest,
                    uint32_t newest, const char* blob, const char* saver, uint32_t* version) {
  constexpr size_t kHeader = sizeof magic + 4, kChecksum = 8;
  LeReader head(bytes, n, blob);
  DDPH_CHECK(std::memcmp(head.take(sizeof magic, "the magic"), magic, sizeof magic) == 0,
             DDPH_INVALID_ARGUMENT, blob << ": wrong magic; this blob was not saved by " << saver);
  const uint64_t got = head.get(4, "the version");
  if (oldest == newest)
    DDPH_CHECK(got == newest, DDPH_INVALID_ARGUMENT,
               blob << ": version " << got << ", but this build reads version " << newest
                    << " only; load it with the ddphooks build that saved it");
  else
    DDPH_CHECK(got >= oldest && got <= newest, DDPH_INVALID_ARGUMENT,
               blob << ": version " << got << ", but this build reads versions " << oldest << " to "
                    << newest << " only; load it with the ddphooks build that saved it");
  DDPH_CHECK(n >= kHeader + kChecksum, DDPH_INVALID_ARGUMENT,
             blob << ": blob truncated: " << n << " bytes");
  const auto* p = static_cast<const uint8_t*>(bytes);
  LeReader tail(p + n - kChecksum, kChecksum, blob);
  DDPH_CHECK(tail.get(8, "the checksum") == fnv1a64(bytes, n - kChecksum), DDPH_INVALID_ARGUMENT,
             blob << ": checksum mismatch; the blob is corrupt or truncated");
  *version = uint32_t(got);
  return LeReader(p + kHeader, n - kHeader - kChecksum, blob);
}

}  // namespace ddph
