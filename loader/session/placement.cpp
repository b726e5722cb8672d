#include "loader/session/placement.h"

#include <cerrno>
#include <cstdlib>

#include "core/base/error.h"

namespace ddph {
namespace loader {
namespace {

int32_t pick(int32_t from_options, int32_t from_yaml, const char* env1, const char* env2,
             int32_t fallback) {
  if (from_options >= 0) return from_options;
  if (from_yaml >= 0) return from_yaml;
  int32_t v;
  if (env_int(env1, &v) || env_int(env2, &v)) return v;
  return fallback;
}

}  // namespace

bool env_int(const char* name, int32_t* out) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  DDPH_CHECK(*end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX, DDPH_INVALID_ARGUMENT,
             "environment variable " << name << "='" << text << "' is not a non-negative integer");
  *out = int32_t(v);
  return true;
}

Placement resolve_placement(int32_t opt_rank, int32_t opt_world, const CommSpec& yaml) {
  // -1 leaves the value to the YAML or the environment; any other negative
  // number is a mistake (or a wrapped integer), not "unset".
  DDPH_CHECK(
      opt_rank >= -1, DDPH_INVALID_ARGUMENT,
      "rank is " << opt_rank << " in the session options; it must be -1 (unset) or 0 and up");
  DDPH_CHECK(opt_world == -1 || opt_world >= 1, DDPH_INVALID_ARGUMENT,
             "world_size is " << opt_world
                              << " in the session options; it must be -1 (unset) or 1 and up");
  Placement p;
  p.rank = pick(opt_rank, yaml.rank, "DDPH_RANK", "RANK", 0);
  p.world_size = pick(opt_world, yaml.world_size, "DDPH_WORLD_SIZE", "WORLD_SIZE", 1);
  DDPH_CHECK(p.world_size >= 1, DDPH_INVALID_ARGUMENT,
             "world_size is " << p.world_size << "; it must be at least 1");
  DDPH_CHECK(p.rank < p.world_size, DDPH_INVALID_ARGUMENT,
             "rank " << p.rank << " is not below world_size " << p.world_size);
  return p;
}

}  // namespace loader
}  // namespace ddph
