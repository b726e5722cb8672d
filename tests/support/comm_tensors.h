// Typed 1-D host tensors for communicator tests (comm_gloo, comm_mpi): a
// tensor over a vector it owns, views into it, and element access as
// doubles, exact for the values the tests use.
#pragma once

#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddph_test {

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
// which set() checks, aborting on a test bug).
double get(Tensor& t, int64_t i);
void set(Tensor& t, int64_t i, double v);

double now_s();
double seconds_since(double start);

// What a host-memory communicator (Gloo, MPI) answers when handed a host
// pointer labelled kDLCUDA. A CUDA build stages CUDA buffers through host
// memory (core/comm/host_staging.h): without a GPU that fails for want of
// one; with a GPU the label is found to be false. A build without CUDA
// refuses the device type outright.
inline void expect_false_cuda_label_refused(int code, const std::string& message) {
#if DDPH_TEST_WITH_CUDA
  if (message.find("no usable CUDA device") != std::string::npos) {
    EXPECT_EQ(code, DDPH_UNSUPPORTED) << message;
    return;
  }
  EXPECT_EQ(code, DDPH_INVALID_ARGUMENT) << message;
  EXPECT_NE(message.find("is labelled kDLCUDA but its data is not CUDA device memory"),
            std::string::npos)
      << message;
#else
  EXPECT_EQ(code, DDPH_UNSUPPORTED) << message;
  EXPECT_NE(message.find("device type 2"), std::string::npos) << message;
#endif
}

}  // namespace ddph_test
