// Defining a plugin's one exported symbol. In exactly one source file of a
// plugin:
//   DDPH_DEFINE_PLUGIN("default", "0.1.0", kHooks, kNumHooks, nullptr, 0)
// where kHooks is a `const ddph_hook_t* const[]` (static storage).
#pragma once

#include <ddph/ddph.h>

#include "core/base/host.h"

#define DDPH_DEFINE_PLUGIN(family_, version_, hooks_, num_hooks_, comms_, num_comms_)   \
  extern "C" DDPH_EXPORT const ddph_plugin_t* ddph_plugin_entry(const ddph_host_t* host) { \
    if (!::ddph::set_host(host)) return nullptr;                                        \
    static const ddph_plugin_t plugin = [] {                                            \
      ddph_plugin_t p{};                                                                \
      p.struct_size = sizeof p;                                                         \
      p.abi_major = DDPH_ABI_MAJOR;                                                     \
      p.abi_minor = DDPH_ABI_MINOR;                                                     \
      p.family = family_;                                                               \
      p.version = version_;                                                             \
      p.num_hooks = num_hooks_;                                                         \
      p.hooks = hooks_;                                                                 \
      p.num_comms = num_comms_;                                                         \
      p.comms = comms_;                                                                 \
      return p;                                                                         \
    }();                                                                                \
    return &plugin;                                                                     \
  }
