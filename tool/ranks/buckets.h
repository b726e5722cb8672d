// DDP-style gradient buckets for `ddph train` (and the one `ddph bench` times).
//
// Like PyTorch's Reducer, parameters are taken in reverse order (the order
// backward produces their gradients) and packed into flat buffers, so the
// first bucket is ready early and its communication overlaps the rest of
// backward. Bucket indices are stable, so every rank submits the same
// buckets in the same order.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/dtype.h"

namespace ddph::tool {

struct BucketSlot {
  int param = 0;       // index into the parameter list
  int64_t offset = 0;  // element offset in the bucket buffer
  int64_t numel = 0;
};

struct BucketPlan {
  std::vector<BucketSlot> slots;
  int64_t numel = 0;
};

// Packs parameters (given by element counts, forward order) into buckets of
// at most cap_bytes of fp32. A bucket holds parameters while they fit; a
// parameter larger than the cap gets a bucket of its own. (PyTorch closes a
// bucket only after it passes the cap; keeping the cap a hard limit makes
// the flag's meaning simpler to state.) cap_bytes <= 0 puts everything in one.
std::vector<BucketPlan> plan_buckets(const std::vector<int64_t>& param_numels, int64_t cap_bytes);

// One bucket's flat buffer (fp32, or bf16/fp16 for mixed precision) and the
// ABI views of its parameters, in the form ddph_session_submit takes. Not
// copyable: the bucket struct points into it.
class GradBucket {
 public:
  GradBucket(uint64_t index, BucketPlan plan,
             const std::vector<const std::vector<int64_t>*>& shapes,
             ddph::DType dtype = ddph::DType::F32);
  GradBucket(const GradBucket&) = delete;
  GradBucket& operator=(const GradBucket&) = delete;

  const BucketPlan& plan() const { return plan_; }
  ddph::DType dtype() const { return dtype_; }
  // The buffer as floats: meaningful for an fp32 bucket only.
  float* data() { return buffer_.data(); }
  // The buffer's bytes whatever the dtype; element k at k * dtype_size.
  void* raw() { return buffer_.data(); }
  // Lends float32 tensors through params[k].data (by default NULL: not
  // shared): tensors[p] for parameter p of the model, indexed like the
  // shapes given to the constructor. Each must hold the parameter's numel
  // floats and outlive this bucket.
  void share_param_data(const std::vector<float*>& tensors);
  // The ABI view, stamped with this step; valid while this object lives.
  const ddph_bucket_t* bucket(uint64_t step, bool is_last);

 private:
  BucketPlan plan_;
  std::vector<float> buffer_;
  std::vector<const std::vector<int64_t>*> shapes_;
  std::vector<ddph_param_t> params_;
  int64_t numel_ = 0;
  ddph::DType dtype_ = ddph::DType::F32;
  ddph_bucket_t bucket_{};
};

}  // namespace ddph::tool
