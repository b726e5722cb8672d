// The residual checkpoint format (see residuals.h). Integers are written
// byte by byte so that the blob reads the same on any host.
#include <cstring>

#include "core/error.h"
#include "plugins/quantization/residuals.h"

namespace ddph {
namespace quantization {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'Q', 'R', 'E', 'S'};

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}

void put_floats(std::string& out, const std::vector<float>& v) {
  put_le(out, v.size(), 8);
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put_le(out, bits, 4);
  }
}

class Reader {
 public:
  Reader(const void* bytes, size_t n) : p_(static_cast<const uint8_t*>(bytes)), n_(n) {}
  uint64_t le(int bytes, const char* what) {
    need(size_t(bytes), what);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(p_[pos_ + size_t(i)]) << (8 * i);
    pos_ += size_t(bytes);
    return v;
  }
  const uint8_t* take(size_t bytes, const char* what) {
    need(bytes, what);
    const uint8_t* p = p_ + pos_;
    pos_ += bytes;
    return p;
  }
  size_t left() const { return n_ - pos_; }
  std::vector<float> floats(uint64_t index, const char* what) {
    const uint64_t length = le(8, what);
    DDPH_CHECK(length <= left() / 4, DDPH_INVALID_ARGUMENT,
               "quantization state: blob truncated: bucket "
                   << index << " claims " << length << " floats of " << what << ", " << left()
                   << " bytes are left");
    std::vector<float> r(length);
    const uint8_t* p = take(length * 4, what);
    for (size_t i = 0; i < length; ++i) {
      const uint32_t bits = uint32_t(p[4 * i]) | uint32_t(p[4 * i + 1]) << 8 |
                            uint32_t(p[4 * i + 2]) << 16 | uint32_t(p[4 * i + 3]) << 24;
      std::memcpy(&r[i], &bits, 4);
    }
    return r;
  }

 private:
  void need(size_t bytes, const char* what) {
    DDPH_CHECK(bytes <= n_ - pos_, DDPH_INVALID_ARGUMENT,
               "quantization state: blob truncated at byte " << pos_ << " of " << n_
                                                             << " while reading " << what);
  }
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

}  // namespace

std::string encode_residuals(const ResidualMap& map) {
  std::string out(kMagic, sizeof kMagic);
  put_le(out, kResidualStateVersion, 4);
  put_le(out, map.size(), 4);
  for (const auto& kv : map) {
    put_le(out, kv.first, 8);
    put_floats(out, kv.second.own);
    put_floats(out, kv.second.owner);
  }
  return out;
}

ResidualMap decode_residuals(const void* bytes, size_t n) {
  Reader in(bytes, n);
  DDPH_CHECK(std::memcmp(in.take(sizeof kMagic, "the magic"), kMagic, sizeof kMagic) == 0,
             DDPH_INVALID_ARGUMENT,
             "quantization state: wrong magic; this blob was not saved by a quantization hook");
  const uint64_t version = in.le(4, "the version");
  DDPH_CHECK(version == kResidualStateVersion, DDPH_INVALID_ARGUMENT,
             "quantization state: version " << version << ", but this plugin reads version "
                                            << kResidualStateVersion);
  const uint64_t count = in.le(4, "the bucket count");
  ResidualMap map;
  for (uint64_t b = 0; b < count; ++b) {
    const uint64_t index = in.le(8, "a bucket index");
    BucketResidual r;
    r.own = in.floats(index, "the own residual");
    r.owner = in.floats(index, "the owner residual");
    DDPH_CHECK(map.emplace(index, std::move(r)).second, DDPH_INVALID_ARGUMENT,
               "quantization state: bucket index " << index << " appears twice");
  }
  DDPH_CHECK(in.left() == 0, DDPH_INVALID_ARGUMENT,
             "quantization state: " << in.left() << " bytes after the last bucket");
  return map;
}

}  // namespace quantization
}  // namespace ddph
