// The steps before start_iter: PyTorch's allreduce_hook on the bucket as it
// is, whatever its dtype (divide first, then sum: DDPH_AVG), counted as
// sent uncompressed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/dtype.h"
#include "plugins/powersgd/collectives.h"
#include "plugins/powersgd/step_log.h"

namespace ddph {
namespace powersgd {

class WarmUp {
 public:
  explicit WarmUp(uint64_t start_iter) : start_iter_(start_iter) {}
  // Whether step `iter` (0-based: PyTorch's state.iter) is a warm-up step.
  bool covers(uint64_t iter) const { return iter < start_iter_; }
  void run(void* data, DType dtype, size_t n, Collectives& comm, StepLog& log) const {
    log.count_compression(n, n, dtype);
    comm.average_bucket(data, dtype, n);
  }

 private:
  uint64_t start_iter_;
};

}  // namespace powersgd
}  // namespace ddph
