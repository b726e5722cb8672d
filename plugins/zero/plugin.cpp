#include "core/hook/hook_plugin.h"
#include "plugins/zero/hooks.h"

using namespace ddph::zero;

DDPH_DEFINE_HOOK_PLUGIN("zero", "0.1.0", &zero_step_hook(), &zero_step_interleaved_hook())
