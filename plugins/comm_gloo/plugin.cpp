// libddph_comm_gloo.so: the embedded default communicator (Gloo over TCP).
#include "core/plugin.h"

#include <ddph/ddph.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/host.h"
#include "core/options.h"
#include "plugins/comm_gloo/comm_table.h"
#include "plugins/comm_gloo/store_adapters.h"

namespace ddph {
namespace comm_gloo {
namespace {

constexpr const char kHostnameDefault[] = "127.0.0.1";
constexpr const char kIfaceDefault[] = "";

const ddph_option_spec_t kOptions[] = {
    spec_string("hostname", kHostnameDefault,
                "address this rank listens on and gives its peers (use a routable one across "
                "machines)"),
    spec_string("iface", kIfaceDefault,
                "network interface to listen on, e.g. eth0; overrides hostname when set"),
};

// A string option, or its default when the caller passed no options at all.
std::string string_option(const Options& options, const ddph_comm_init_t& init, const char* name,
                          const char* fallback) {
  for (size_t i = 0; i < init.num_options; ++i)
    if (init.options[i].name != nullptr && std::strcmp(init.options[i].name, name) == 0)
      return options.get_string(name);
  return fallback;
}

void check_init(const ddph_comm_init_t* init) {
  DDPH_CHECK(init != nullptr, DDPH_INVALID_ARGUMENT, "comm_gloo create: init is NULL");
  DDPH_CHECK(init->struct_size >= DDPH_COMM_INIT_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
             "comm_gloo create: init.struct_size " << init->struct_size
                                                   << " is smaller than the v1.0 size "
                                                   << DDPH_COMM_INIT_SIZE_V1_0);
  DDPH_CHECK(init->world_size >= 1, DDPH_INVALID_ARGUMENT,
             "comm_gloo create: init.world_size " << init->world_size << " must be >= 1");
  DDPH_CHECK(init->rank >= 0 && init->rank < init->world_size, DDPH_INVALID_ARGUMENT,
             "comm_gloo create: init.rank " << init->rank << " is outside [0, " << init->world_size
                                            << ")");
  DDPH_CHECK(init->timeout_ms > 0, DDPH_INVALID_ARGUMENT,
             "comm_gloo create: init.timeout_ms " << init->timeout_ms << " must be > 0");
  DDPH_CHECK(
      init->num_options == 0 || init->options != nullptr, DDPH_INVALID_ARGUMENT,
      "comm_gloo create: init.options is NULL but init.num_options is " << init->num_options);
  if (init->store != nullptr) {
    const ddph_store_t* s = init->store;
    DDPH_CHECK(s->struct_size >= DDPH_STORE_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
               "comm_gloo create: init.store->struct_size "
                   << s->struct_size << " is smaller than the v1.0 size " << DDPH_STORE_SIZE_V1_0);
    DDPH_CHECK(s->set != nullptr && s->get != nullptr, DDPH_INVALID_ARGUMENT,
               "comm_gloo create: init.store->set and init.store->get must both be set");
  } else {
    DDPH_CHECK(init->rendezvous != nullptr && init->rendezvous[0] != '\0', DDPH_INVALID_ARGUMENT,
               "comm_gloo create: neither init.rendezvous nor init.store is set");
    check_rendezvous_url(init->rendezvous);
  }
}

ddph_error_t* create(const ddph_comm_init_t* init, ddph_comm_t** out) {
  // A host that calls create without going through ddph_plugin_entry still
  // gets proper error objects, made with its own table.
  if (host() == nullptr && init != nullptr && init->struct_size >= DDPH_COMM_INIT_SIZE_V1_0)
    set_host(init->host);
  if (host() == nullptr) {
    // No table to make an error with: the failure shows as *out == NULL.
    if (out != nullptr) *out = nullptr;
    return nullptr;
  }
  return guard([&] {
    DDPH_CHECK(out != nullptr, DDPH_INVALID_ARGUMENT, "comm_gloo create: out is NULL");
    *out = nullptr;
    check_init(init);
    Options options(init->options, init->num_options);
    CommConfig config;
    config.rank = init->rank;
    config.world = init->world_size;
    config.timeout = std::chrono::milliseconds(init->timeout_ms);
    config.prefix = init->prefix != nullptr ? init->prefix : "";
    config.hostname = string_option(options, *init, "hostname", kHostnameDefault);
    config.iface = string_option(options, *init, "iface", kIfaceDefault);
    DDPH_CHECK(!config.hostname.empty() || !config.iface.empty(), DDPH_INVALID_ARGUMENT,
               "comm_gloo create: option 'hostname' is empty and 'iface' is not set");

    // The host's store wins over a URL: the loader passes one or the other.
    std::shared_ptr<::gloo::rendezvous::Store> store;
    if (init->store != nullptr)
      store.reset(new HostStore(init->store, config.timeout));
    else
      store = open_url_store(init->rendezvous, config.rank);
    *out = make_comm_table(std::make_unique<Communicator>(config, std::move(store)));
  });
}

const ddph_comm_factory_t kFactory = [] {
  ddph_comm_factory_t f{};
  f.struct_size = sizeof f;
  f.backend = "gloo";
  f.summary = "Gloo over TCP on CPU tensors; rendezvous via file://, redis:// or the host's store";
  f.options = kOptions;
  f.num_options = sizeof kOptions / sizeof kOptions[0];
  f.create = &create;
  return f;
}();

const ddph_comm_factory_t* const kComms[] = {&kFactory};

}  // namespace
}  // namespace comm_gloo
}  // namespace ddph

DDPH_DEFINE_PLUGIN("comm_gloo", "0.1.0", nullptr, 0, ::ddph::comm_gloo::kComms, 1)
