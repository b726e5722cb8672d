#pragma once

#include <ddph/ddph.h>

namespace ddph {
namespace hierarchical {

const ddph_hook_t& hierarchical_hook();

}  // namespace hierarchical
}  // namespace ddph
