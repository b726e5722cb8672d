#include "core/base/plugin.h"

#include "plugins/quantization/hooks.h"

namespace {

using namespace ddph::quantization;

const ddph_hook_t* const kHooks[] = {&per_tensor_hook(), &per_channel_hook(),
                                     &per_channel_gather_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("quantization", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
