// The checks of one hook, each meant to run in its own child process with
// the plugin freshly opened there.
#pragma once

#include <ddph/ddph.h>

#include <string>
#include <vector>

#include "conformance/isolate.h"

namespace ddph::plugin_checks {

struct HookCheck {
  std::string name;  // the table's check column
  // done_wait_s: how long to wait for a completion before calling it lost.
  Outcome (*run)(const ddph_hook_t* hook, double done_wait_s);
};

// In table order.
const std::vector<HookCheck>& hook_checks();

}  // namespace ddph::plugin_checks
