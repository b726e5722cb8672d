// The ddph_comm_t table over a Communicator.
#pragma once

#include <ddph/ddph.h>

#include <memory>

#include "plugins/comm_gloo/communicator.h"

namespace ddph {
namespace comm_gloo {

// Returns a table that owns comm; table->destroy(table->ctx) frees both.
ddph_comm_t* make_comm_table(std::unique_ptr<Communicator> comm);

}  // namespace comm_gloo
}  // namespace ddph
