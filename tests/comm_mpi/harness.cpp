#include "tests/comm_mpi/harness.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace comm_mpi_test {
namespace {

uint16_t float_to_half_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) == 0) return sign;
  int exp = int((u >> 23) & 0xff) - 127 + 15;
  uint32_t man = u & 0x7fffffu;
  if (exp <= 0 || exp >= 31 || (man & 0x1fffu) != 0) {
    std::fprintf(stderr, "test bug: %g is not a normal half\n", double(f));
    std::abort();
  }
  return uint16_t(sign | (exp << 10) | (man >> 13));
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  uint32_t u =
      (exp == 0 && man == 0) ? sign : sign | (uint32_t(exp - 15 + 127) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0xffffu) != 0) {
    std::fprintf(stderr, "test bug: %g is not a bfloat16\n", double(f));
    std::abort();
  }
  return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

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

Tensor::Tensor(DLDataType dtype, int64_t numel)
    : bytes_(size_t(numel) * dtype.bits / 8 + 1), numel_(numel) {
  dl_.data = bytes_.data();
  dl_.device = DLDevice{kDLCPU, 0};
  dl_.ndim = 1;
  dl_.dtype = dtype;
  dl_.shape = &numel_;
}

DLTensor view(Tensor& t, int64_t offset, int64_t* shape) {
  DLTensor v = *t.dl();
  v.shape = shape;
  v.byte_offset = size_t(offset) * v.dtype.bits / 8;
  return v;
}

double get(Tensor& t, int64_t i) {
  DLDataType d = t.dl()->dtype;
  if (d.code == kDLFloat && d.bits == 32) return t.as<float>()[i];
  if (d.code == kDLFloat && d.bits == 64) return t.as<double>()[i];
  if (d.code == kDLFloat && d.bits == 16) return half_to_float(t.as<uint16_t>()[i]);
  if (d.code == kDLBfloat) return bf16_to_float(t.as<uint16_t>()[i]);
  if (d.code == kDLInt && d.bits == 32) return t.as<int32_t>()[i];
  if (d.code == kDLInt && d.bits == 64) return double(t.as<int64_t>()[i]);
  if (d.code == kDLUInt && d.bits == 8) return t.as<uint8_t>()[i];
  if (d.code == kDLInt && d.bits == 8) return t.as<int8_t>()[i];
  std::abort();
}

void set(Tensor& t, int64_t i, double v) {
  DLDataType d = t.dl()->dtype;
  if (d.code == kDLFloat && d.bits == 32)
    t.as<float>()[i] = float(v);
  else if (d.code == kDLFloat && d.bits == 64)
    t.as<double>()[i] = v;
  else if (d.code == kDLFloat && d.bits == 16)
    t.as<uint16_t>()[i] = float_to_half_exact(float(v));
  else if (d.code == kDLBfloat)
    t.as<uint16_t>()[i] = float_to_bf16_exact(float(v));
  else if (d.code == kDLInt && d.bits == 32)
    t.as<int32_t>()[i] = int32_t(v);
  else if (d.code == kDLInt && d.bits == 64)
    t.as<int64_t>()[i] = int64_t(v);
  else if (d.code == kDLUInt && d.bits == 8)
    t.as<uint8_t>()[i] = uint8_t(v);
  else if (d.code == kDLInt && d.bits == 8)
    t.as<int8_t>()[i] = int8_t(v);
  else
    std::abort();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace comm_mpi_test
