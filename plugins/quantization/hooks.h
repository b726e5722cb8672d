// The hook tables of the quantization family, gathered by plugin.cpp.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace quantization {

const ddph_hook_t& per_tensor_hook();
const ddph_hook_t& per_channel_hook();
const ddph_hook_t& per_channel_gather_hook();

}  // namespace quantization
}  // namespace ddph
