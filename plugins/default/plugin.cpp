#include "core/base/plugin.h"

#include "plugins/default/hooks.h"

namespace {

using namespace ddph::default_family;

const ddph_hook_t* const kHooks[] = {&allreduce_hook(), &fp16_compress_hook(),
                                     &bf16_compress_hook(), &fp16_wrapper_hook(),
                                     &bf16_wrapper_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("default", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
