// Float32 buckets whose parameters have shapes (matrices, convolution
// kernels), as low-rank hooks see them, run through a session over Gloo.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/session_ranks.h"

namespace ddph_test {

using Shape = std::vector<int64_t>;

// A float32 bucket over data (session_ranks.h's FloatBucket) with one
// ddph_param_t per shape, laid out back to back from offset 0.
class ShapedBucket {
 public:
  ShapedBucket(std::vector<float>& data, const std::vector<Shape>& shapes, uint64_t index,
               uint64_t step, bool is_last);
  ShapedBucket(const ShapedBucket&) = delete;
  const ddph_bucket_t* get() const { return &flat_.bucket; }

 private:
  std::vector<Shape> shapes_;
  std::vector<ddph_param_t> params_;
  FloatBucket flat_;  // points at shapes_' and params_' storage
};

int64_t numel_of(const std::vector<Shape>& shapes);

// Submits and flushes; returns the bucket's code, its message in *message
// (and printed when it is an error).
ddph_code_t run_shaped(ddph_session_t* s, std::vector<float>& data,
                       const std::vector<Shape>& shapes, uint64_t index, uint64_t step,
                       bool is_last, std::string* message = nullptr);

}  // namespace ddph_test
