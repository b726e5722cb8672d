// libddph_comm_gloo.so: the embedded default communicator (Gloo over TCP).
#include <ddph/ddph.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/base/error.h"
#include "core/base/option_check.h"
#include "core/base/options.h"
#include "core/comm/comm_plugin.h"
#include "core/comm/host_staging.h"
#include "core/comm/rendezvous/gloo/gloo_store.h"
#include "plugins/comm_gloo/communicator.h"

namespace ddph {
namespace comm_gloo {
namespace {

constexpr const char kHostnameDefault[] = "127.0.0.1";
constexpr const char kIfaceDefault[] = "";

// A string option, or its default when the caller passed no options at all.
std::string string_option(const Options& options, const char* name, const char* fallback) {
  return options.has(name) ? options.get_string(name) : fallback;
}

// One YAML file serves every rank, but each rank listens on its own
// address: DDPH_GLOO_HOSTNAME or DDPH_GLOO_IFACE, set per process, win over
// the options (as GLOO_SOCKET_IFNAME does in PyTorch). `ddph lab` sets the
// first for each rank.
void apply_address_environment(CommConfig& config) {
  const char* iface = std::getenv("DDPH_GLOO_IFACE");
  const char* hostname = std::getenv("DDPH_GLOO_HOSTNAME");
  if (iface != nullptr && iface[0] != '\0') {
    config.iface = iface;
    config.address_source = "DDPH_GLOO_IFACE";
  } else if (hostname != nullptr && hostname[0] != '\0') {
    config.iface.clear();
    config.hostname = hostname;
    config.address_source = "DDPH_GLOO_HOSTNAME";
  }
}

}  // namespace

struct GlooPlugin {
  static constexpr CommPluginInfo kInfo{
      "comm_gloo", "gloo",
      "Gloo over TCP on CPU tensors (CUDA tensors staged through host memory); rendezvous via "
      "file://, redis://, tcp://, env:// or the host's store",
      Rendezvous::kRequired};
  static inline const ddph_option_spec_t kOptions[] = {
      spec_string("hostname", kHostnameDefault,
                  "address this rank listens on and gives its peers (use a routable one across "
                  "machines)"),
      spec_string("iface", kIfaceDefault,
                  "network interface to listen on, e.g. eth0; overrides hostname when set"),
  };

  // The options as a whole: the table's check() (before connecting) and
  // connect() run it.
  static void check_options(OptionCheck& c) {
    const std::string hostname = string_option(c.options, "hostname", kHostnameDefault);
    const std::string iface = string_option(c.options, "iface", kIfaceDefault);
    DDPH_CHECK_OPTION(c, !hostname.empty() || !iface.empty(), "hostname",
                      "comm_gloo: option 'hostname' is empty and 'iface' is not set; give the "
                      "address this rank listens on, or a network interface");
  }

  static std::unique_ptr<CommBackend> connect(const ddph_comm_init_t& init) {
    Options options(init.options, init.num_options);
    CommConfig config;
    set_place(config, init);
    config.prefix = init.prefix != nullptr ? init.prefix : "";
    run_option_check(init.options, init.num_options, &check_options);
    config.hostname = string_option(options, "hostname", kHostnameDefault);
    config.iface = string_option(options, "iface", kIfaceDefault);
    apply_address_environment(config);
    return stage_cuda_through_host(
        std::make_unique<Communicator>(config, rendezvous::open_init_store(init)), "gloo");
  }
};

}  // namespace comm_gloo
}  // namespace ddph

DDPH_DEFINE_COMM_PLUGIN(::ddph::comm_gloo::GlooPlugin)
