// Where this process sits in the job: its rank and the world size, as the
// session resolves them for the communicator and for tools.
#pragma once

#include <cstdint>

#include "loader/job/config.h"

namespace ddph {
namespace loader {

struct Placement {
  int32_t rank = 0;
  int32_t world_size = 1;
};

// Reads environment variable `name` into *out: false when it is unset or
// empty; throws DDPH_INVALID_ARGUMENT naming it when it is not an integer
// from 0 to INT32_MAX.
bool env_int(const char* name, int32_t* out);

// Resolves rank and world size: session options (>= 0), then YAML, then env
// DDPH_RANK/DDPH_WORLD_SIZE, then RANK/WORLD_SIZE, else 0 and 1.
Placement resolve_placement(int32_t opt_rank, int32_t opt_world, const CommSpec& yaml);

}  // namespace loader
}  // namespace ddph
