#include "core/hook/hook_plugin.h"
#include "plugins/powersgd/psgd_hook.h"

using namespace ddph::powersgd;

DDPH_DEFINE_HOOK_PLUGIN("powersgd", "0.1.0", &layerwise_hook(), &batched_hook())
