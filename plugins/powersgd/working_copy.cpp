#include "plugins/powersgd/working_copy.h"

#include <utility>

namespace ddph {
namespace powersgd {

WorkingCopy::Fp32::Fp32(ScratchBuffers::Lease lease, const Where& at, void* bucket, DType dtype,
                        size_t n)
    : lease_(std::move(lease)), at_(at), bucket_(bucket), dtype_(dtype), n_(n) {
  fp32_ = static_cast<float*>(bucket);
  if (dtype_ != DType::F32) {
    fp32_ = static_cast<float*>(lease_.data());
    cast_into(at_, dtype_, bucket_, DType::F32, fp32_, n_);
  }
}

void WorkingCopy::Fp32::write_back() {
  if (dtype_ != DType::F32) cast_into(at_, DType::F32, fp32_, dtype_, bucket_, n_);
}

WorkingCopy::Fp32 WorkingCopy::of(const Where& at, void* data, DType dtype, size_t n) {
  return Fp32(buffer_.get(at, 0, dtype == DType::F32 ? 0 : n * sizeof(float)), at, data, dtype, n);
}

}  // namespace powersgd
}  // namespace ddph
