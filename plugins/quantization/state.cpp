// The residual checkpoint format (see residuals.h), in core's checksummed
// little-endian frame, so that a blob reads the same on any host and a
// flipped bit anywhere is refused rather than loaded as a residual.
#include <cmath>

#include "core/base/error.h"
#include "core/base/le_bytes.h"
#include "plugins/quantization/residuals.h"

namespace ddph {
namespace quantization {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'Q', 'R', 'E', 'S'};
constexpr const char* kBlob = "quantization state";

// The hook never keeps a non-finite residual (a bucket holding NaN or Inf
// leaves its residual as it was), and one would turn every later bucket of
// that index into NaN: such a blob was not saved by the hook.
void check_finite(const std::vector<float>& v, uint64_t index, const char* field) {
  for (size_t i = 0; i < v.size(); ++i)
    DDPH_CHECK(std::isfinite(v[i]), DDPH_INVALID_ARGUMENT,
               kBlob << ": bucket " << index << ", " << field << " element " << i << " is "
                     << (std::isnan(v[i]) ? "NaN"
                         : v[i] > 0       ? "+Inf"
                                          : "-Inf")
                     << "; error feedback residuals are always finite, so this is not a "
                     << "saved state");
}

}  // namespace

std::string encode_residuals(const ResidualMap& map) {
  LeWriter w;
  put_frame_header(w, kMagic, kResidualStateVersion);
  w.put(map.size(), 4);
  for (const auto& kv : map) {
    w.put(kv.first, 8);
    w.put_floats(kv.second.own);
    w.put_floats(kv.second.owner);
  }
  return finish_frame(w);
}

ResidualMap decode_residuals(const void* bytes, size_t n) {
  // Magic, version and checksum first: a flipped bit anywhere is reported
  // as corruption, not as a strange length.
  LeReader in = open_frame(bytes, n, kMagic, kResidualStateVersion, kBlob, "a quantization hook");
  const uint64_t count = in.get(4, "the bucket count");
  ResidualMap map;
  for (uint64_t b = 0; b < count; ++b) {
    const uint64_t index = in.get(8, "a bucket index");
    // Saved in ascending order (a std::map): anything else was not saved.
    DDPH_CHECK(map.empty() || index > map.rbegin()->first, DDPH_INVALID_ARGUMENT,
               kBlob << ": bucket index " << index << " follows " << map.rbegin()->first
                     << "; a saved blob lists each index once, in ascending order");
    BucketResidual r;
    r.own = in.get_floats("the own residual");
    r.owner = in.get_floats("the owner residual");
    check_finite(r.own, index, "own residual");
    check_finite(r.owner, index, "owner residual");
    map.emplace_hint(map.end(), index, std::move(r));
  }
  DDPH_CHECK(in.left() == 0, DDPH_INVALID_ARGUMENT,
             kBlob << ": " << in.left() << " bytes after the last bucket");
  return map;
}

}  // namespace quantization
}  // namespace ddph
