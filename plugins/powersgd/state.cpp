// The checkpoint codec (see state.h). Integers are written byte by byte, so
// a blob saved on one host loads on any other.
#include "plugins/powersgd/state.h"

#include <cstring>

#include "core/error.h"

namespace ddph {
namespace powersgd {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'P', 'S', 'G', 'D'};

const char* kind_name(HookKind k) {
  return k == HookKind::kLayerwise ? "powersgd" : "batched_powersgd";
}

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

class Writer {
 public:
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(char(uint8_t(v >> (8 * i))));
  }
  void floats(const std::vector<float>& v) {
    le(v.size(), 8);
    for (float f : v) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      le(bits, 4);
    }
  }
  std::string finish() {
    le(fnv1a(reinterpret_cast<const uint8_t*>(out_.data()), out_.size()), 8);
    return std::move(out_);
  }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint64_t le(int bytes, const char* what) {
    need(size_t(bytes), what);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(p_[pos_ + size_t(i)]) << (8 * i);
    pos_ += size_t(bytes);
    return v;
  }
  std::vector<float> floats(uint64_t index, const char* what) {
    const uint64_t count = le(8, what);
    DDPH_CHECK(count <= (n_ - pos_) / 4, DDPH_INVALID_ARGUMENT,
               "powersgd state: blob truncated: bucket "
                   << index << " claims " << count << " floats of " << what << ", " << n_ - pos_
                   << " bytes are left");
    std::vector<float> v(count);
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t bits = uint32_t(le(4, what));
      std::memcpy(&v[i], &bits, 4);
    }
    return v;
  }
  size_t left() const { return n_ - pos_; }

 private:
  void need(size_t bytes, const char* what) {
    DDPH_CHECK(bytes <= n_ - pos_, DDPH_INVALID_ARGUMENT,
               "powersgd state: blob truncated at byte " << pos_ << " of " << n_
                                                         << " while reading " << what);
  }
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

}  // namespace

std::string encode_state(const PsgdState& s, HookKind kind) {
  Writer w;
  for (char c : kMagic) w.le(uint8_t(c), 1);
  w.le(kStateVersion, 4);
  w.le(uint32_t(kind), 4);
  w.le(s.iter, 8);
  w.le(uint32_t(s.rng.pos), 4);
  for (uint32_t word : s.rng.mt) w.le(word, 4);
  w.le(s.buckets.size(), 4);
  for (const auto& kv : s.buckets) {
    w.le(kv.first, 8);
    w.floats(kv.second.p);
    w.floats(kv.second.q);
    w.floats(kv.second.error);
  }
  return w.finish();
}

PsgdState decode_state(const void* bytes, size_t n, HookKind kind) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  DDPH_CHECK(n >= sizeof kMagic && std::memcmp(p, kMagic, sizeof kMagic) == 0,
             DDPH_INVALID_ARGUMENT,
             "powersgd state: wrong magic; this blob was not saved by a powersgd hook");
  DDPH_CHECK(n >= sizeof kMagic + 8, DDPH_INVALID_ARGUMENT,
             "powersgd state: blob truncated: " << n << " bytes");
  Reader head(p + sizeof kMagic, n - sizeof kMagic);
  const uint64_t version = head.le(4, "the version");
  DDPH_CHECK(
      version == kStateVersion, DDPH_INVALID_ARGUMENT,
      "powersgd state: version " << version << ", but this plugin reads version " << kStateVersion);
  // The checksum comes before any length is trusted: a flipped bit anywhere
  // is reported as corruption, not as a strange length.
  DDPH_CHECK(n >= sizeof kMagic + 16, DDPH_INVALID_ARGUMENT,
             "powersgd state: blob truncated: " << n << " bytes");
  Reader tail(p + n - 8, 8);
  const uint64_t stored = tail.le(8, "the checksum");
  DDPH_CHECK(stored == fnv1a(p, n - 8), DDPH_INVALID_ARGUMENT,
             "powersgd state: checksum mismatch; the blob is corrupt or truncated");
  Reader in(p + sizeof kMagic + 4, n - sizeof kMagic - 4 - 8);
  const uint64_t k = in.le(4, "the hook kind");
  DDPH_CHECK(k == uint32_t(kind), DDPH_INVALID_ARGUMENT,
             "powersgd state: the blob was saved by "
                 << (k <= 1 ? kind_name(HookKind(k)) : "an unknown hook") << ", not by "
                 << kind_name(kind));
  PsgdState s;
  s.iter = in.le(8, "the step");
  const uint64_t pos = in.le(4, "the rng position");
  DDPH_CHECK(pos <= uint64_t(Mt19937::kN), DDPH_INVALID_ARGUMENT,
             "powersgd state: rng position " << pos << " is past " << Mt19937::kN);
  s.rng.pos = int(pos);
  for (uint32_t& word : s.rng.mt) word = uint32_t(in.le(4, "the rng state"));
  const uint64_t count = in.le(4, "the bucket count");
  for (uint64_t b = 0; b < count; ++b) {
    const uint64_t index = in.le(8, "a bucket index");
    BucketMemory m;
    m.p = in.floats(index, "P");
    m.q = in.floats(index, "Q");
    m.error = in.floats(index, "the error");
    DDPH_CHECK(s.buckets.emplace(index, std::move(m)).second, DDPH_INVALID_ARGUMENT,
               "powersgd state: bucket index " << index << " appears twice");
  }
  DDPH_CHECK(in.left() == 0, DDPH_INVALID_ARGUMENT,
             "powersgd state: " << in.left() << " bytes after the last bucket");
  return s;
}

}  // namespace powersgd
}  // namespace ddph
