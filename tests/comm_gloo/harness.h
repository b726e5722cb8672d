// Loading comm_gloo and talking to it from tests: the factory, connecting a
// rank, typed tensors, and errors as (code, message).
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <vector>

namespace comm_gloo_test {

// dlopens libddph_comm_gloo.so once per process; aborts the test process
// with a message if it cannot.
const ddph_plugin_t* plugin();
ddph_plugin_entry_fn plugin_entry();
const ddph_comm_factory_t* factory();

// An error taken out of its C object (which is freed).
struct Err {
  ddph_code_t code = DDPH_OK;
  std::string message;
  bool ok() const { return code == DDPH_OK; }
  std::string text() const;  // "DDPH_TIMEOUT: message" for diagnostics
};
Err take(ddph_error_t* e);

struct Connect {
  int rank = 0;
  int world = 1;
  std::string rendezvous;  // "file://..." etc.; ignored when store is set
  const ddph_store_t* store = nullptr;
  std::string prefix = "test";
  int64_t timeout_ms = 2000;
};

// Calls factory()->create; on failure returns NULL and fills *err.
ddph_comm_t* connect(const Connect& c, Err* err);
std::string file_url(const std::string& dir);

// A 1-D host tensor over a vector it owns.
class Tensor {
 public:
  Tensor(DLDataType dtype, int64_t numel);
  DLTensor* dl() { return &dl_; }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(bytes_.data());
  }
  int64_t numel() const { return numel_; }

 private:
  std::vector<unsigned char> bytes_;
  int64_t numel_;
  DLTensor dl_{};
};

// A view of n elements at element offset `offset` of t (aliases t's memory).
DLTensor view(Tensor& t, int64_t offset, int64_t* shape_storage);

constexpr DLDataType kF32{kDLFloat, 32, 1}, kF64{kDLFloat, 64, 1}, kF16{kDLFloat, 16, 1},
    kBF16{kDLBfloat, 16, 1}, kI32{kDLInt, 32, 1}, kI64{kDLInt, 64, 1}, kU8{kDLUInt, 8, 1},
    kI8{kDLInt, 8, 1};

// Element i of t as a double / set from a double; exact for the values the
// tests use (16-bit floats: only values a half / bfloat16 holds exactly).
double get(Tensor& t, int64_t i);
void set(Tensor& t, int64_t i, double v);

double seconds_since(double start);
double now_s();

}  // namespace comm_gloo_test
