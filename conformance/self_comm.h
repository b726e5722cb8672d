// A world-of-one communicator with no network, the way a host framework can
// provide its own: every collective is a copy. validate-plugin and the
// conformance suite run hooks on it, so a hook is checked without Gloo.
#pragma once

#include <ddph/ddph.h>

namespace ddph::plugin_checks {

ddph_comm_t* self_comm();  // static; never destroyed

}  // namespace ddph::plugin_checks
