// The hook tables of the default family, gathered by plugin.cpp.
#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace default_family {

const ddph_hook_t& allreduce_hook();
const ddph_hook_t& fp16_compress_hook();
const ddph_hook_t& bf16_compress_hook();
const ddph_hook_t& fp16_wrapper_hook();
const ddph_hook_t& bf16_wrapper_hook();

}  // namespace default_family
}  // namespace ddph
