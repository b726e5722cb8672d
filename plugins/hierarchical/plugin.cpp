#include "core/base/plugin.h"

#include "plugins/hierarchical/hooks.h"

namespace {

using namespace ddph::hierarchical;

const ddph_hook_t* const kHooks[] = {&hierarchical_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("hierarchical", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
