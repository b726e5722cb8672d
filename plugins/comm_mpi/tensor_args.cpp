#include "plugins/comm_mpi/tensor_args.h"

#include <climits>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace ddph {
namespace comm_mpi {

HostBuf check_tensor(const DLTensor* t, const char* collective, const char* arg) {
  DDPH_CHECK(t != nullptr, DDPH_INVALID_ARGUMENT, collective << ": " << arg << " is NULL");
  DDPH_CHECK(t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost,
             DDPH_UNSUPPORTED,
             collective << ": " << arg << " is on device type " << int(t->device.device_type)
                        << "; the MPI communicator only reaches host memory (kDLCPU)");
  DDPH_CHECK(is_flat(*t), DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " must be 1-D contiguous (ndim " << t->ndim << ")");
  DDPH_CHECK(t->shape[0] >= 0, DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " has negative shape[0] " << t->shape[0]);
  DType dtype;
  char text[32];
  DDPH_CHECK(dtype_from_dl(t->dtype, &dtype), DDPH_UNSUPPORTED,
             collective << ": " << arg << " has dtype " << dl_dtype_text(t->dtype, text)
                        << ", which the MPI communicator does not support (float32, float64, "
                           "float16, bfloat16, int32, int64, uint8)");
  DDPH_CHECK(t->data != nullptr || t->shape[0] == 0, DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << "->data is NULL for " << t->shape[0] << " elements");
  return HostBuf{data_ptr(*t), dtype, size_t(t->shape[0])};
}

void check_same_dtype(const HostBuf& send, const HostBuf& recv, const char* collective) {
  DDPH_CHECK(send.dtype == recv.dtype, DDPH_INVALID_ARGUMENT,
             collective << ": recv dtype " << dtype_name(recv.dtype) << " differs from send dtype "
                        << dtype_name(send.dtype));
}

void check_numel(const HostBuf& b, size_t expected, const char* collective, const char* arg,
                 const char* rule) {
  DDPH_CHECK(b.numel == expected, DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " has " << b.numel << " elements, expected " << expected
                        << " (" << rule << ")");
}

void check_mpi_count(size_t n, const char* collective, const char* what) {
  DDPH_CHECK(n <= size_t(INT_MAX), DDPH_UNSUPPORTED,
             collective << ": " << what << " is " << n
                        << " elements, more than MPI's int counts hold (" << INT_MAX
                        << "); split the bucket");
}

bool overlaps(const HostBuf& a, const HostBuf& b) {
  if (a.bytes() == 0 || b.bytes() == 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a.data), pb = reinterpret_cast<uintptr_t>(b.data);
  return pa < pb + b.bytes() && pb < pa + a.bytes();
}

void check_op(ddph_reduce_op_t op, const char* collective) {
  DDPH_CHECK(
      op == DDPH_SUM || op == DDPH_AVG || op == DDPH_MAX || op == DDPH_MIN, DDPH_INVALID_ARGUMENT,
      collective << ": op " << int(op) << " is not DDPH_SUM, DDPH_AVG, DDPH_MAX or DDPH_MIN");
}

}  // namespace comm_mpi
}  // namespace ddph
