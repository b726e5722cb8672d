// The parameters `ddph bench` (and `ddph choose`) puts in its bucket: one
// flat gradient (the default), or, with --matrix ROWSxCOLS, as many rows x
// cols matrices as fit and a 1-D remainder, so that hooks which factor
// matrices (powersgd) see the shapes a model would give them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tool/ranks/buckets.h"

namespace ddph::tool {

// Deterministic values in [-1, 1), different per rank so a reduction has
// something to do, and small enough that fp16 neither overflows nor
// flushes to zero: the gradients of a synthetic bucket (bench, choose).
void fill_gradients(std::vector<float>& v, int rank);

// Parses "ROWSxCOLS" (both >= 1); throws std::invalid_argument naming --matrix.
void parse_matrix(const std::string& text, int64_t* rows, int64_t* cols);

class BenchParams {
 public:
  // rows == 0: one flat parameter of numel elements.
  BenchParams(int64_t numel, int64_t rows, int64_t cols);
  BucketPlan plan() const;
  // Shapes in parameter order, as GradBucket takes them; valid while this lives.
  std::vector<const std::vector<int64_t>*> shapes() const;

 private:
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> numels_;
};

}  // namespace ddph::tool
