#include "core/base/plugin.h"

#include "plugins/post_localsgd/hooks.h"

namespace {

using namespace ddph::post_localsgd;

const ddph_hook_t* const kHooks[] = {&post_localsgd_hook(), &model_averaging_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("post_localsgd", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
