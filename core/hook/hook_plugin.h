// The plugin entry of a hook family (hooks, no communicators): its hook
// tables, listed once. In exactly one source file of the plugin:
//   DDPH_DEFINE_HOOK_PLUGIN("default", "0.1.0", &allreduce_hook(), &fp16_compress_hook())
// each argument a `const ddph_hook_t*`: hook_table<T>() of a hook class the
// file sees, or a family's table function for one defined elsewhere.
#pragma once

#include <ddph/ddph.h>

#include "core/base/plugin.h"
#include "core/hook/hook.h"

#define DDPH_DEFINE_HOOK_PLUGIN(family_, version_, ...)    \
  namespace {                                              \
  const ddph_hook_t* const kFamilyHooks[] = {__VA_ARGS__}; \
  }                                                        \
  DDPH_DEFINE_PLUGIN(family_, version_, kFamilyHooks,      \
                     sizeof kFamilyHooks / sizeof kFamilyHooks[0], nullptr, 0)
