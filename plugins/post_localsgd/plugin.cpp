#include "core/hook/hook_plugin.h"
#include "plugins/post_localsgd/hooks.h"

using namespace ddph::post_localsgd;

DDPH_DEFINE_HOOK_PLUGIN("post_localsgd", "0.1.0", &post_localsgd_hook(), &model_averaging_hook())
