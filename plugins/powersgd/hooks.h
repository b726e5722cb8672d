// The hook tables of the powersgd family, gathered by plugin.cpp.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace powersgd {

const ddph_hook_t& layerwise_hook();
const ddph_hook_t& batched_hook();

}  // namespace powersgd
}  // namespace ddph
