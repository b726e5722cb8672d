#include "core/hook/bucket_check.h"

#include "core/base/error.h"
#include "core/base/tensor.h"

namespace ddph {

namespace {

// Every param's view lies within the buffer's n elements.
void check_params(const ddph_bucket_t* b, int64_t n);

// The buffer and, with `params`, every param; returns the buffer's dtype.
DType check(const ddph_bucket_t* b, BucketMemory memory, bool params) {
  DDPH_CHECK(b != nullptr, DDPH_INVALID_ARGUMENT, "bucket is NULL");
  DDPH_CHECK(b->struct_size >= DDPH_BUCKET_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
             "bucket.struct_size is " << b->struct_size << ", smaller than the v1.0 size "
                                      << DDPH_BUCKET_SIZE_V1_0);
  const DLTensor& buf = b->buffer;
  DDPH_CHECK(buf.ndim == 1, DDPH_INVALID_ARGUMENT,
             "bucket.buffer.ndim is " << buf.ndim << "; a bucket buffer must be 1-D");
  DDPH_CHECK(buf.shape != nullptr, DDPH_INVALID_ARGUMENT, "bucket.buffer.shape is NULL");
  DDPH_CHECK(
      is_flat(buf), DDPH_INVALID_ARGUMENT,
      "bucket.buffer.strides is {" << buf.strides[0] << "}; a bucket buffer must be contiguous");
  const int64_t n = buf.shape[0];
  DDPH_CHECK(n >= 0, DDPH_INVALID_ARGUMENT, "bucket.buffer.shape[0] is negative (" << n << ")");
  DDPH_CHECK(n == 0 || buf.data != nullptr, DDPH_INVALID_ARGUMENT,
             "bucket.buffer.data is NULL for " << n << " elements");
  DType dtype;
  char text[32];
  DDPH_CHECK(dtype_from_dl(buf.dtype, &dtype), DDPH_UNSUPPORTED,
             "bucket.buffer.dtype " << dl_dtype_text(buf.dtype, text)
                                    << " is not supported (float32, float64, float16, bfloat16, "
                                       "int32, int64, uint8)");
  // A count no address space holds would overflow every byte computation.
  DDPH_CHECK(uint64_t(n) <= uint64_t(INT64_MAX) / dtype_size(dtype), DDPH_INVALID_ARGUMENT,
             "bucket.buffer.shape[0] is " << n << ": " << dtype_name(dtype)
                                          << " elements of that many bytes overflow");
  const DLDeviceType device = buf.device.device_type;
  const bool on_cuda = device == kDLCUDA;
  DDPH_CHECK(device == kDLCPU || device == kDLCUDAHost || on_cuda, DDPH_UNSUPPORTED,
             "bucket.buffer.device type " << int(device)
                                          << " is not supported (kDLCPU, kDLCUDAHost, kDLCUDA)");
  DDPH_CHECK(!on_cuda || memory == BucketMemory::kHostOrCuda, DDPH_UNSUPPORTED,
             "bucket.buffer is CUDA memory (device " << buf.device.device_id
                                                     << "), but this hook runs on host memory "
                                                        "only (docs/cuda.md lists the hooks "
                                                        "with a CUDA path)");
  if (params) check_params(b, n);
  return dtype;
}

void check_params(const ddph_bucket_t* b, int64_t n) {
  DDPH_CHECK(b->num_params == 0 || b->params != nullptr, DDPH_INVALID_ARGUMENT,
             "bucket.params is NULL but bucket.num_params is " << b->num_params);
  for (size_t i = 0; i < b->num_params; ++i) {
    const ddph_param_t& p = b->params[i];
    DDPH_CHECK(p.struct_size >= DDPH_PARAM_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
               "bucket.params[" << i << "].struct_size is " << p.struct_size
                                << ", smaller than the v1.0 size " << DDPH_PARAM_SIZE_V1_0);
    DDPH_CHECK(p.ndim >= 0 && p.ndim <= 32, DDPH_INVALID_ARGUMENT,
               "bucket.params[" << i << "].ndim is " << p.ndim << " (0..32 allowed)");
    DDPH_CHECK(p.ndim == 0 || p.shape != nullptr, DDPH_INVALID_ARGUMENT,
               "bucket.params[" << i << "].shape is NULL with ndim " << p.ndim);
    bool empty = false;
    for (int d = 0; d < p.ndim; ++d) {
      DDPH_CHECK(
          p.shape[d] >= 0, DDPH_INVALID_ARGUMENT,
          "bucket.params[" << i << "].shape[" << d << "] is negative (" << p.shape[d] << ")");
      empty = empty || p.shape[d] == 0;
    }
    // Multiplied only while the product stays within the bucket, so it never
    // overflows; a view with a zero dimension is empty whatever the others.
    int64_t count = empty ? 0 : 1;
    for (int d = 0; d < p.ndim && !empty; ++d) {
      DDPH_CHECK(count <= n / p.shape[d], DDPH_INVALID_ARGUMENT,
                 "bucket.params[" << i << "].shape overflows the bucket of " << n << " elements");
      count *= p.shape[d];
    }
    DDPH_CHECK(p.offset >= 0 && p.offset <= n && count <= n - p.offset, DDPH_INVALID_ARGUMENT,
               "bucket.params[" << i << "] (offset " << p.offset << ", " << count
                                << " elements) lies outside the bucket of " << n << " elements");
  }
}

}  // namespace

bool params_checked(const ddph_bucket_t& bucket) {
  return bucket.struct_size >= DDPH_BUCKET_SIZE_V1_8 && bucket.params_checked != 0;
}

DType check_bucket(const ddph_bucket_t* b, BucketMemory memory) {
#ifdef NDEBUG
  // The caller's check of the params (O(num_params)) is trusted; the
  // buffer's (O(1)) depends on this hook's memory and is made here.
  return check(b, memory, b == nullptr || !params_checked(*b));
#else
  return check(b, memory, true);
#endif
}

DType check_submitted_bucket(const ddph_bucket_t* b) {
  return check(b, BucketMemory::kHostOrCuda, true);
}

}  // namespace ddph
