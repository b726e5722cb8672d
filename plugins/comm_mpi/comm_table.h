// The ddph_comm_t table over a Communicator.
#pragma once

#include <ddph/ddph.h>

#include <memory>

#include "plugins/comm_mpi/communicator.h"

namespace ddph {
namespace comm_mpi {

// Returns a table that owns comm; table->destroy(table->ctx) frees both.
ddph_comm_t* make_comm_table(std::unique_ptr<Communicator> comm);

}  // namespace comm_mpi
}  // namespace ddph
