#include "core/base/plugin.h"

#include "plugins/powersgd/hooks.h"

namespace {

using namespace ddph::powersgd;

const ddph_hook_t* const kHooks[] = {&layerwise_hook(), &batched_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("powersgd", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
