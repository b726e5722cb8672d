// How the layer-wise hook splits a bucket, as PyTorch's powerSGD_hook does:
// each gradient viewed as (shape[0], -1), compressed with rank
// r = min(n, m, rank) only if (n + m) * r * min_compression_rate < n * m,
// all others concatenated and sent as they are.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

namespace ddph {
namespace powersgd {

struct MatrixSlot {
  int64_t offset = 0;  // element offset of the gradient in the bucket
  int rows = 0, cols = 0, r = 0;
  int64_t p_offset = 0, q_offset = 0;  // where its P (rows x r) and Q (cols x r) live

  bool operator==(const MatrixSlot& o) const {
    return offset == o.offset && rows == o.rows && cols == o.cols && r == o.r &&
           p_offset == o.p_offset && q_offset == o.q_offset;
  }
};

// Same-shaped compressed matrices, in the order PyTorch's shape_to_tensors
// dict yields them (shapes by first appearance, members in bucket order).
// P and Q memories follow this order, so they have PyTorch's layout.
struct ShapeGroup {
  int rows = 0, cols = 0, r = 0;
  std::vector<int> members;  // indices into BucketPlan::matrices
};

struct Segment {
  int64_t offset = 0, numel = 0;
};

struct BucketPlan {
  std::vector<MatrixSlot> matrices;  // in P/Q memory order
  std::vector<ShapeGroup> groups;
  // Sent uncompressed, concatenated in bucket order: gradients that fail the
  // test (biases, small matrices) and any elements no gradient covers.
  std::vector<Segment> uncompressed;
  int64_t uncompressed_numel = 0;
  int64_t p_numel = 0, q_numel = 0;
  // PyTorch's compression statistics for this bucket, in elements.
  int64_t numel_before = 0, numel_after = 0;
};

// Throws DDPH_INVALID_ARGUMENT when parameter views overlap. A bucket
// without params is one 1-D gradient (never compressed).
BucketPlan plan_bucket(const ddph_bucket_t& bucket, int rank, double min_compression_rate,
                       const char* hook);

}  // namespace powersgd
}  // namespace ddph
