// The checkpoint codec (see state.h), on core's little-endian helpers, so a
// blob saved on one host loads on any other.
#include "plugins/powersgd/state.h"

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace powersgd {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'P', 'S', 'G', 'D'};
constexpr const char* kBlob = "powersgd state";

const char* kind_name(HookKind k) {
  return k == HookKind::kLayerwise ? "powersgd" : "batched_powersgd";
}

}  // namespace

std::string encode_state(const PsgdState& s, HookKind kind) {
  LeWriter w;
  put_frame_header(w, kMagic, kStateVersion);
  w.put(uint32_t(kind), 4);
  w.put(s.iter, 8);
  w.put(uint32_t(s.rng.pos), 4);
  for (uint32_t word : s.rng.mt) w.put(word, 4);
  w.put(s.buckets.size(), 4);
  for (const auto& kv : s.buckets) {
    w.put(kv.first, 8);
    w.put(kv.second.has_pq ? 1 : 0, 1);
    w.put_floats(kv.second.p);
    w.put_floats(kv.second.q);
    w.put_floats(kv.second.error);
  }
  return finish_frame(w);
}

PsgdState decode_state(const void* bytes, size_t n, HookKind kind) {
  // Magic, version and checksum first: a flipped bit anywhere is reported
  // as corruption, not as a strange length.
  LeReader in = open_frame(bytes, n, kMagic, kStateVersion, kBlob, "a powersgd hook");
  const uint64_t k = in.get(4, "the hook kind");
  DDPH_CHECK(k == uint32_t(kind), DDPH_INVALID_ARGUMENT,
             kBlob << ": the blob was saved by "
                   << (k <= 1 ? kind_name(HookKind(k)) : "an unknown hook") << ", not by "
                   << kind_name(kind));
  PsgdState s;
  s.iter = in.get(8, "the step");
  const uint64_t pos = in.get(4, "the rng position");
  DDPH_CHECK(pos <= uint64_t(Mt19937::kN), DDPH_INVALID_ARGUMENT,
             kBlob << ": rng position " << pos << " is past " << Mt19937::kN);
  s.rng.pos = int(pos);
  for (uint32_t& word : s.rng.mt) word = uint32_t(in.get(4, "the rng state"));
  const uint64_t count = in.get(4, "the bucket count");
  for (uint64_t b = 0; b < count; ++b) {
    const uint64_t index = in.get(8, "a bucket index");
    SavedBucket m;
    const uint64_t flags = in.get(1, "the bucket flags");
    DDPH_CHECK(flags <= 1, DDPH_INVALID_ARGUMENT,
               kBlob << ": bucket " << index << " has unknown flags " << flags);
    m.has_pq = flags == 1;
    m.p = in.get_floats("P");
    m.q = in.get_floats("Q");
    m.error = in.get_floats("the error");
    DDPH_CHECK(m.has_pq || (m.p.empty() && m.q.empty()), DDPH_INVALID_ARGUMENT,
               kBlob << ": bucket " << index << " holds P or Q but its flags say they are absent");
    DDPH_CHECK(s.buckets.emplace(index, std::move(m)).second, DDPH_INVALID_ARGUMENT,
               kBlob << ": bucket index " << index << " appears twice");
  }
  DDPH_CHECK(in.left() == 0, DDPH_INVALID_ARGUMENT,
             kBlob << ": " << in.left() << " bytes after the last bucket");
  return s;
}

}  // namespace powersgd
}  // namespace ddph
