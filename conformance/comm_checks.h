// The checks of one communicator factory, each meant to run in its own child
// process with the plugin freshly opened there.
#pragma once

#include <ddph/ddph.h>

#include "conformance/isolate.h"

namespace ddph::plugin_checks {

// Sizes, backend name, option defaults, and misuse of create refused.
Outcome check_comm_table(const ddph_comm_factory_t* f);

// A world of one over a file rendezvous in a fresh directory, then every
// collective the table offers, each result compared with its input.
Outcome check_comm_collectives(const ddph_comm_factory_t* f, double timeout_s);

}  // namespace ddph::plugin_checks
