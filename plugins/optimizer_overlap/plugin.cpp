#include "core/base/plugin.h"

#include "plugins/optimizer_overlap/hooks.h"

namespace {

const ddph_hook_t* const kHooks[] = {&ddph::optimizer_overlap::hook_then_optimizer_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("optimizer_overlap", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr,
                   0)
