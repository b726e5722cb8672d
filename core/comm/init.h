// The checks every comm plugin's create() makes on what the loader or a host
// handed it, so that each backend refuses a bad init with the same words.
#pragma once

#include <ddph/ddph.h>

#include <chrono>

namespace ddph {

// A rank's place in a communicator: the base of a backend's configuration.
struct CommPlace {
  int rank = 0;
  int world = 1;
  std::chrono::milliseconds timeout{0};
};

// Sets place to what init gives (after check_comm_init).
inline void set_place(CommPlace& place, const ddph_comm_init_t& init) {
  place = CommPlace{init.rank, init.world_size, std::chrono::milliseconds(init.timeout_ms)};
}

enum class Rendezvous {
  kRequired,  // above one rank, init.store or a file:// / redis:// init.rendezvous (Gloo, NCCL)
  kNone,      // the engine finds its peers itself (MPI); both may be unset
};

// Throws DDPH_INVALID_ARGUMENT naming `who` (e.g. "comm_gloo create") and the
// field at fault: struct size, world size, rank, timeout, options, the
// store's table, or a malformed rendezvous URL.
void check_comm_init(const ddph_comm_init_t* init, const char* who, Rendezvous rendezvous);

}  // namespace ddph
