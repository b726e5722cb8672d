#include "core/hook/hook_plugin.h"
#include "plugins/default/hooks.h"

using namespace ddph::default_family;

DDPH_DEFINE_HOOK_PLUGIN("default", "0.1.0", &allreduce_hook(), &fp16_compress_hook(),
                        &bf16_compress_hook(), &fp16_wrapper_hook(), &bf16_wrapper_hook())
