#include "tool/ranks/buckets.h"

#include "core/base/dtype.h"

namespace ddph::tool {

std::vector<BucketPlan> plan_buckets(const std::vector<int64_t>& param_numels, int64_t cap_bytes) {
  std::vector<BucketPlan> plans;
  BucketPlan current;
  const int64_t elem = static_cast<int64_t>(sizeof(float));
  for (int p = static_cast<int>(param_numels.size()) - 1; p >= 0; --p) {
    int64_t n = param_numels[p];
    bool fits = cap_bytes <= 0 || (current.numel + n) * elem <= cap_bytes;
    if (!fits && !current.slots.empty()) {
      plans.push_back(std::move(current));
      current = BucketPlan{};
    }
    current.slots.push_back(BucketSlot{p, current.numel, n});
    current.numel += n;
  }
  if (!current.slots.empty()) plans.push_back(std::move(current));
  return plans;
}

GradBucket::GradBucket(uint64_t index, BucketPlan plan,
                       const std::vector<const std::vector<int64_t>*>& shapes, ddph::DType dtype)
    : plan_(std::move(plan)),
      // Floats for their alignment; a 16-bit bucket uses half of them.
      buffer_((plan_.numel * ddph::dtype_size(dtype) + 3) / 4, 0.f),
      numel_(plan_.numel),
      dtype_(dtype) {
  for (const BucketSlot& slot : plan_.slots) shapes_.push_back(shapes.at(slot.param));
  params_.resize(plan_.slots.size());
  for (size_t k = 0; k < plan_.slots.size(); ++k) {
    ddph_param_t& v = params_[k];
    v = ddph_param_t{};
    v.struct_size = sizeof(ddph_param_t);
    v.offset = plan_.slots[k].offset;
    v.ndim = static_cast<int32_t>(shapes_[k]->size());
    v.shape = shapes_[k]->data();
    // data.data stays NULL unless share_param_data lends the tensors.
  }
  bucket_.struct_size = sizeof(ddph_bucket_t);
  bucket_.index = index;
  bucket_.buffer.data = buffer_.data();
  bucket_.buffer.device = DLDevice{kDLCPU, 0};
  bucket_.buffer.ndim = 1;
  bucket_.buffer.dtype = ddph::dtype_to_dl(dtype);
  bucket_.buffer.shape = &numel_;
  bucket_.num_params = params_.size();
  bucket_.params = params_.empty() ? nullptr : params_.data();
}

void GradBucket::share_param_data(const std::vector<float*>& tensors) {
  for (size_t k = 0; k < plan_.slots.size(); ++k) {
    DLTensor& t = params_[k].data;
    t = DLTensor{};
    t.data = tensors.at(plan_.slots[k].param);
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = params_[k].ndim;
    t.dtype = ddph::dtype_to_dl(ddph::DType::F32);
    t.shape = const_cast<int64_t*>(params_[k].shape);  // contiguous: strides stay NULL
  }
}

const ddph_bucket_t* GradBucket::bucket(uint64_t step, bool is_last) {
  bucket_.step = step;
  bucket_.is_last = is_last ? 1 : 0;
  return &bucket_;
}

}  // namespace ddph::tool
