// Flat 1-D tensors: the only shape a bucket buffer or a collective argument
// has in ddphooks.
#pragma once

#include <ddph/ddph.h>

#include "core/base/dtype.h"

namespace ddph {

// A DLTensor that owns its one shape entry, so it can be made on the fly and
// handed to a communicator.
class FlatTensor {
 public:
  FlatTensor(void* data, DType dtype, int64_t numel, DLDevice device = DLDevice{kDLCPU, 0});
  FlatTensor(const FlatTensor& other);
  FlatTensor& operator=(const FlatTensor& other);

  DLTensor* dl() { return &dl_; }
  const DLTensor* dl() const { return &dl_; }
  int64_t numel() const { return numel_; }

 private:
  int64_t numel_;
  DLTensor dl_;
};

// Element count of any DLTensor (product of its shape; 1 for a scalar; 0
// with a zero dimension; INT64_MAX where the product would overflow, a count
// no real tensor has, so comparisons with it fail). Negative dimensions are
// the caller's to refuse.
int64_t numel(const DLTensor& t);
// True when t is 1-D and dense (strides NULL or {1}).
bool is_flat(const DLTensor& t);
// Start of the data, byte_offset applied.
void* data_ptr(const DLTensor& t);

}  // namespace ddph
