#include "core/base/tensor.h"

#include <cstdint>

namespace ddph {

FlatTensor::FlatTensor(void* data, DType dtype, int64_t numel, DLDevice device)
    : numel_(numel), dl_{} {
  dl_.data = data;
  dl_.device = device;
  dl_.ndim = 1;
  dl_.dtype = dtype_to_dl(dtype);
  dl_.shape = &numel_;
  dl_.strides = nullptr;
  dl_.byte_offset = 0;
}

FlatTensor::FlatTensor(const FlatTensor& other) : numel_(other.numel_), dl_(other.dl_) {
  dl_.shape = &numel_;
}

FlatTensor& FlatTensor::operator=(const FlatTensor& other) {
  numel_ = other.numel_;
  dl_ = other.dl_;
  dl_.shape = &numel_;
  return *this;
}

int64_t numel(const DLTensor& t) {
  // Shapes come from hosts: a zero dimension empties the tensor whatever the
  // others say, and a product past int64 saturates rather than overflows.
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i)
    if (__builtin_mul_overflow(n, t.shape[i], &n)) return INT64_MAX;
  return n;
}

bool is_flat(const DLTensor& t) {
  return t.ndim == 1 && t.shape != nullptr && (t.strides == nullptr || t.strides[0] == 1);
}

void* data_ptr(const DLTensor& t) {
  // An empty tensor may have no data; an offset from NULL is undefined.
  return t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
}

}  // namespace ddph
