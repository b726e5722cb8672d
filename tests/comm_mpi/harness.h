// Talking to comm_mpi from tests that run as MPI ranks under mpirun: the
// factory, making a communicator, typed tensors, and errors as (code,
// message). Every process of the job runs the same tests.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <vector>

namespace comm_mpi_test {

// dlopens libddph_comm_mpi.so once per process, as the loader does
// (RTLD_LOCAL); aborts with a message if it cannot.
const ddph_comm_factory_t* factory();

// This process's rank and the job's size, from the launcher's environment
// (so that tests need not call MPI themselves).
int job_rank();
int job_size();

// An error taken out of its C object (which is freed).
struct Err {
  ddph_code_t code = DDPH_OK;
  std::string message;
  bool ok() const { return code == DDPH_OK; }
  std::string text() const;  // "6: message" for diagnostics
};
Err take(ddph_error_t* e);

// factory()->create as rank/world (default: the job's); NULL and *err on failure.
ddph_comm_t* make_comm(Err* err, int64_t timeout_ms = 20000, int rank = -1, int world = -1);

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

// A view of *shape elements at element offset `offset` of t (aliases t's memory).
DLTensor view(Tensor& t, int64_t offset, int64_t* shape);

constexpr DLDataType kF32{kDLFloat, 32, 1}, kF64{kDLFloat, 64, 1}, kF16{kDLFloat, 16, 1},
    kBF16{kDLBfloat, 16, 1}, kI32{kDLInt, 32, 1}, kI64{kDLInt, 64, 1}, kU8{kDLUInt, 8, 1},
    kI8{kDLInt, 8, 1};

// Element i of t as a double / set from a double; exact for the values the
// tests use (16-bit floats: only values a half / bfloat16 holds exactly,
// which set() checks).
double get(Tensor& t, int64_t i);
void set(Tensor& t, int64_t i, double v);

double now_s();

}  // namespace comm_mpi_test
