// The hook tables of the zero family, gathered by plugin.cpp.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace zero {

const ddph_hook_t& zero_step_hook();
const ddph_hook_t& zero_step_interleaved_hook();

}  // namespace zero
}  // namespace ddph
