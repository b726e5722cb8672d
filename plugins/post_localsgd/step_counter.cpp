#include "plugins/post_localsgd/step_counter.h"

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace post_localsgd {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'L', 'S', 'G', 'D'};

}  // namespace

std::string encode_step(uint64_t step) {
  LeWriter w;
  put_frame_header(w, kMagic, kStepStateVersion);
  w.put(step, 8);
  return finish_frame(w);
}

uint64_t decode_step(const void* bytes, size_t n, const char* hook) {
  const std::string blob = std::string(hook) + " state";
  // Magic, version and checksum first: a flipped bit anywhere is reported
  // as corruption, not as another step.
  LeReader r =
      open_frame(bytes, n, kMagic, kStepStateVersion, blob.c_str(), "a post_localsgd hook");
  const uint64_t step = r.get(8, "the step");
  DDPH_CHECK(r.left() == 0, DDPH_INVALID_ARGUMENT,
             blob << ": " << r.left() << " bytes after the step");
  DDPH_CHECK(step <= kMaxStep, DDPH_INVALID_ARGUMENT,
             blob << ": step " << step << " is out of range (at most 2^53 = " << kMaxStep
                  << "); a step counter never gets there, so this is not a saved state");
  return step;
}

void StepCounter::save(ddph_write_fn write, void* sink) const {
  const std::string blob = encode_step(step_);
  write(sink, blob.data(), blob.size());
}

}  // namespace post_localsgd
}  // namespace ddph
