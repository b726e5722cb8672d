#include "tests/comm_gloo/harness.h"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/support/host.h"

namespace comm_gloo_test {

ddph_plugin_entry_fn plugin_entry() {
  static ddph_plugin_entry_fn entry = [] {
    const char* path = DDPH_PLUGIN_DIR "/libddph_comm_gloo.so";
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
      std::abort();
    }
    auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(h, "ddph_plugin_entry"));
    if (entry == nullptr) {
      std::fprintf(stderr, "%s has no ddph_plugin_entry\n", path);
      std::abort();
    }
    return entry;
  }();
  return entry;
}

const ddph_plugin_t* plugin() {
  static const ddph_plugin_t* p = plugin_entry()(ddph_host());
  return p;
}

const ddph_comm_factory_t* factory() {
  const ddph_plugin_t* p = plugin();
  return p != nullptr && p->num_comms == 1 ? p->comms[0] : nullptr;
}

std::string Err::text() const {
  return std::to_string(int(code)) + ": " + message;
}

Err take(ddph_error_t* e) {
  Err r;
  if (e == nullptr) return r;
  const ddph_host_t* h = ddph_host();
  r.code = h->error_code(e);
  r.message = h->error_message(e);
  h->error_free(e);
  return r;
}

ddph_comm_t* connect(const Connect& c, Err* err) {
  ddph_comm_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.rank = c.rank;
  init.world_size = c.world;
  init.rendezvous = c.store ? nullptr : c.rendezvous.c_str();
  init.store = c.store;
  init.prefix = c.prefix.c_str();
  init.timeout_ms = c.timeout_ms;
  ddph_comm_t* comm = nullptr;
  *err = take(factory()->create(&init, &comm));
  return err->ok() ? comm : nullptr;
}

ddph_comm_t* must_connect(int rank, int world, const std::string& dir, int64_t timeout_ms) {
  Connect c;
  c.timeout_ms = timeout_ms;
  c.rank = rank;
  c.world = world;
  c.rendezvous = file_url(dir + "/store");
  Err err;
  ddph_comm_t* comm = connect(c, &err);
  if (comm == nullptr) std::fprintf(stderr, "[rank %d] connect: %s\n", rank, err.text().c_str());
  return comm;
}

std::string file_url(const std::string& dir) {
  return "file://" + dir;
}

}  // namespace comm_gloo_test
