// The hook tables of the optimizer_overlap family, gathered by plugin.cpp.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace optimizer_overlap {

const ddph_hook_t& hook_then_optimizer_hook();

}  // namespace optimizer_overlap
}  // namespace ddph
