// The hook tables of the mixed_precision family, gathered by plugin.cpp.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace mixed_precision {

const ddph_hook_t& allreduce_upcast_hook();

}  // namespace mixed_precision
}  // namespace ddph
