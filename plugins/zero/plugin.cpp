#include "core/base/plugin.h"

#include "plugins/zero/hooks.h"

namespace {

const ddph_hook_t* const kHooks[] = {&ddph::zero::zero_step_hook(),
                                     &ddph::zero::zero_step_interleaved_hook()};

}  // namespace

DDPH_DEFINE_PLUGIN("zero", "0.1.0", kHooks, sizeof kHooks / sizeof kHooks[0], nullptr, 0)
