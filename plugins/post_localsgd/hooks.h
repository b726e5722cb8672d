#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace post_localsgd {

const ddph_hook_t& post_localsgd_hook();
const ddph_hook_t& model_averaging_hook();

}  // namespace post_localsgd
}  // namespace ddph
