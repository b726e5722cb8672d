#include "core/hook/hook_plugin.h"
#include "plugins/quantization/hooks.h"

using namespace ddph::quantization;

DDPH_DEFINE_HOOK_PLUGIN("quantization", "0.1.0", &per_tensor_hook(), &per_channel_hook(),
                        &per_channel_gather_hook())
