#include "plugins/post_localsgd/step_counter.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/le_bytes.h"

namespace ddph {
namespace post_localsgd {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'L', 'S', 'G', 'D'};
constexpr uint32_t kVersion = 1;

}  // namespace

void StepCounter::save(ddph_write_fn write, void* sink) const {
  LeWriter w;
  for (char c : kMagic) w.put(uint8_t(c), 1);
  w.put(kVersion, 4);
  w.put(step_, 8);
  write(sink, w.bytes().data(), w.bytes().size());
}

void StepCounter::load(const void* bytes, size_t n) {
  LeReader r(bytes, n, "post_localsgd state");
  DDPH_CHECK(std::memcmp(r.take(sizeof kMagic, "magic"), kMagic, sizeof kMagic) == 0,
             DDPH_INVALID_ARGUMENT, "post_localsgd state: not a post_localsgd blob (bad magic)");
  const uint64_t version = r.get(4, "version");
  DDPH_CHECK(version == kVersion, DDPH_INVALID_ARGUMENT,
             "post_localsgd state: version " << version << ", this build reads " << kVersion);
  const uint64_t step = r.get(8, "step");
  DDPH_CHECK(r.left() == 0, DDPH_INVALID_ARGUMENT,
             "post_localsgd state: " << r.left() << " trailing bytes");
  step_ = step;
}

}  // namespace post_localsgd
}  // namespace ddph
