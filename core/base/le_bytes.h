// Little-endian byte strings that read the same on every host, for the
// checkpoint blobs of hooks: integers byte by byte, floats as their IEEE-754
// bits, and a reader whose every overrun is a DDPH_INVALID_ARGUMENT naming
// the blob and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddph {

class LeWriter {
 public:
  void put(uint64_t v, int bytes);
  // n raw bytes.
  void put_bytes(const void* bytes, size_t n);
  // u64 count, then count x f32.
  void put_floats(const std::vector<float>& v);
  // One f64, as its 8 bytes of IEEE-754 bits.
  void put_double(double v);
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class LeReader {
 public:
  // `blob` names the blob in messages ("powersgd state").
  LeReader(const void* bytes, size_t n, const char* blob);
  uint64_t get(int bytes, const char* field);
  // The inverse of put_floats; a count that cannot fit in what is left is
  // reported before anything is allocated.
  std::vector<float> get_floats(const char* field);
  double get_double(const char* field);
  const uint8_t* take(size_t bytes, const char* field);
  size_t left() const { return n_ - pos_; }

 private:
  void need(size_t bytes, const char* field) const;
  const uint8_t* p_;
  size_t n_, pos_ = 0;
  const char* blob_;
};

// FNV-1a 64 of n bytes.
uint64_t fnv1a64(const void* bytes, size_t n);

// A checksummed frame around a blob: 8-byte magic, u32 version, the body,
// then u64 FNV-1a 64 of every byte before it, so that a flipped bit anywhere
// is reported as corruption rather than as a strange length.
// put_frame_header writes the magic and version; finish_frame appends the
// checksum and hands back the blob.
void put_frame_header(LeWriter& w, const char (&magic)[8], uint32_t version);
std::string finish_frame(LeWriter& w);
// Checks magic (a wrong one: "this blob was not saved by <saver>"), version
// (a message naming the version found and the one this build reads) and
// checksum, in that order, and returns a reader over the body alone.
// Throws DDPH_INVALID_ARGUMENT naming `blob`.
LeReader open_frame(const void* bytes, size_t n, const char (&magic)[8], uint32_t version,
                    const char* blob, const char* saver);
// The same for a reader of several versions: accepts oldest..newest and
// tells which one the blob has in *version.
LeReader open_frame(const void* bytes, size_t n, const char (&magic)[8], uint32_t oldest,
                    uint32_t newest, const char* blob, const char* saver, uint32_t* version);

}  // namespace ddph
