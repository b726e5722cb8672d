// A communicator plugin's entry, written once for comm_gloo, comm_mpi and
// comm_nccl: the factory's create() and check(), its table, and the plugin's
// one exported symbol. A plugin describes its communicator in a struct of
// statics and names it once:
//
//   struct GlooPlugin {
//     static constexpr CommPluginInfo kInfo{"comm_gloo", "gloo", "...", Rendezvous::kRequired};
//     static inline const ddph_option_spec_t kOptions[] = {...};
//     static std::unique_ptr<CommBackend> connect(const ddph_comm_init_t& init);
//     static void check_options(OptionCheck& c);  // optional: the table's check
//   };
//   DDPH_DEFINE_COMM_PLUGIN(::ddph::comm_gloo::GlooPlugin)
#pragma once

#include <ddph/ddph.h>

#include <iterator>
#include <memory>
#include <string>
#include <type_traits>

#include "core/base/option_check.h"
#include "core/base/plugin.h"
#include "core/comm/backend.h"

namespace ddph {

struct CommPluginInfo {
  const char* family;   // "comm_gloo": the plugin, and the start of create()'s errors
  const char* backend;  // "gloo": comm.backend in the YAML
  const char* summary;
  Rendezvous rendezvous;
};

namespace comm_plugin_detail {
template <class P, class = void>
struct HasCheck : std::false_type {};
template <class P>
struct HasCheck<P, std::void_t<decltype(&P::check_options)>> : std::true_type {};
}  // namespace comm_plugin_detail

template <class Plugin>
struct CommPlugin {
  static ddph_error_t* create(const ddph_comm_init_t* init, ddph_comm_t** out) {
    static const std::string who = std::string(Plugin::kInfo.family) + " create";
    return create_comm(init, out, who.c_str(), Plugin::kInfo.rendezvous, &Plugin::connect);
  }

  // The plugin's list of factories: this one.
  static const ddph_comm_factory_t* const* comms() {
    static const ddph_comm_factory_t factory =
        comm_factory(Plugin::kInfo.backend, Plugin::kInfo.summary, Plugin::kOptions,
                     std::size(Plugin::kOptions), &create, check());
    static const ddph_comm_factory_t* const list[] = {&factory};
    return list;
  }

 private:
  // The table's check (ABI 1.5): the options as a whole, before connecting,
  // by the rules connect() runs too. NULL without check_options.
  static ddph_error_t* (*check())(ddph_check_t*) {
    if constexpr (comm_plugin_detail::HasCheck<Plugin>::value)
      return [](ddph_check_t* c) { return run_option_check(c, &Plugin::check_options); };
    else
      return nullptr;
  }
};

}  // namespace ddph

// The plugin's ddph_plugin_entry, exporting the one communicator of Plugin
// (fully qualified). Version 0.1.0, as every plugin of this repository.
#define DDPH_DEFINE_COMM_PLUGIN(Plugin)                         \
  DDPH_DEFINE_PLUGIN(Plugin::kInfo.family, "0.1.0", nullptr, 0, \
                     ::ddph::CommPlugin<Plugin>::comms(), 1)
