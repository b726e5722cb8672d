#include "tests/comm_mpi/harness.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace comm_mpi_test {
namespace {

int env_int(const char* a, const char* b, int fallback) {
  for (const char* name : {a, b}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return fallback;
}

}  // namespace

const ddph_comm_factory_t* factory() {
  static const ddph_comm_factory_t* f = [] {
    const char* path = DDPH_PLUGIN_DIR "/libddph_comm_mpi.so";
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
      std::abort();
    }
    auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(h, "ddph_plugin_entry"));
    const ddph_plugin_t* p = entry != nullptr ? entry(ddph_host()) : nullptr;
    if (p == nullptr || p->num_comms != 1) {
      std::fprintf(stderr, "%s: no communicator factory\n", path);
      std::abort();
    }
    return p->comms[0];
  }();
  return f;
}

int job_rank() {
  return env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK", 0);
}
int job_size() {
  return env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", 1);
}

std::string Err::text() const {
  return std::to_string(int(code)) + ": " + message;
}

Err take(ddph_error_t* e) {
  Err r;
  if (e == nullptr) return r;
  r.code = ddph_error_code(e);
  r.message = ddph_error_message(e);
  ddph_error_free(e);
  return r;
}

ddph_comm_t* make_comm(Err* err, int64_t timeout_ms, int rank, int world) {
  ddph_comm_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.rank = rank >= 0 ? rank : job_rank();
  init.world_size = world >= 0 ? world : job_size();
  init.prefix = "test";
  init.timeout_ms = timeout_ms;
  // DDPH_MPI_TEST_STAGING=false runs the same tests on the caller's buffers.
  ddph_option_t staging{};
  staging.struct_size = sizeof staging;
  staging.name = "staging";
  staging.type = DDPH_BOOL;
  const char* env = std::getenv("DDPH_MPI_TEST_STAGING");
  staging.value.b = env == nullptr || std::strcmp(env, "false") != 0;
  init.options = &staging;
  init.num_options = 1;
  ddph_comm_t* comm = nullptr;
  *err = take(factory()->create(&init, &comm));
  return err->ok() ? comm : nullptr;
}

}  // namespace comm_mpi_test
