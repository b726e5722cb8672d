#include "core/base/plugin.h"

#include "plugins/mixed_precision/hooks.h"

namespace {

const ddph_hook_t* const kHooks[] = {&ddph::mixed_precision::allreduce_upcast_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("mixed_precision", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
