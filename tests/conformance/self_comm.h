// A world-of-one communicator provided by the test itself, the way a host
// framework can provide its own: collectives are copies.
#pragma once

#include <ddph/ddph.h>

namespace ddph_test {
ddph_comm_t* self_comm();  // static; never destroyed
}
