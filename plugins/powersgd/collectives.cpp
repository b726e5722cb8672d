#include "plugins/powersgd/collectives.h"

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {
namespace powersgd {

Collectives::Collectives(ddph_comm_t* comm, StepLog& log)
    : comm_(comm), world_(comm_size(comm)), log_(log) {}

void Collectives::average_bucket(void* data, DType dtype, size_t n) {
  FlatTensor buf(data, dtype, int64_t(n), at_.device);
  StepLog::Timer t = log_.in_collective(n * dtype_size(dtype));
  comm_allreduce(comm_, buf, DDPH_AVG, at_.stream);
}

void Collectives::allreduce_sum(float* x, size_t n, DType wire) {
  if (n == 0) return;
  if (wire == DType::F32) {
    StepLog::Timer t = log_.in_collective(n * sizeof(float));
    FlatTensor buf(x, DType::F32, int64_t(n), at_.device);
    comm_allreduce(comm_, buf, DDPH_SUM, at_.stream);
    return;
  }
  // Under fp16_wrapper/bf16_wrapper the factors travel in 16 bits, as they
  // do under PyTorch's wrappers; the products are computed in fp32.
  ScratchBuffers::Lease low = wire_.get(at_, 0, n * 2);
  {
    StepLog::Timer t = log_.in_collective(n * dtype_size(wire));
    cast_into(at_, DType::F32, x, wire, low.data(), n);
    FlatTensor buf(low.data(), wire, int64_t(n), at_.device);
    comm_allreduce(comm_, buf, DDPH_SUM, at_.stream);
  }
  cast_into(at_, wire, low.data(), DType::F32, x, n);
}

void Collectives::divide_by_world(float* x, size_t n) {
  divide_inplace(at_, DType::F32, x, n, world_);
}

float Collectives::uncompressed_scale(DType wire) const {
  if (wire == DType::F16) return 1.0f;
  float up = 1.0f;
  while (up < 2.0f * float(world_)) up *= 2.0f;
  return 1.0f / up;
}

void Collectives::average_uncompressed(float* m, bool feedback, float* data, size_t count,
                                       size_t data_count) {
  ScratchBuffers::Lease lease = uncompressed_.get(at_, 0, count * sizeof(float));
  float* mean = static_cast<float*>(lease.data());
  if (feedback) ops_->saturate_overflow(m, data, data_count);
  ops_->copy(mean, m, count);
  {
    StepLog::Timer t = log_.in_collective(count * sizeof(float));
    FlatTensor buf(mean, DType::F32, int64_t(count), at_.device);
    comm_allreduce(comm_, buf, DDPH_AVG, at_.stream);
  }
  ops_->copy(data, mean, data_count);
  if (feedback) ops_->fallback_error(m, mean, count);
}

}  // namespace powersgd
}  // namespace ddph
