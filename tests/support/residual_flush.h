// ABI 1.10's take_residual against exact arithmetic, for every family whose
// hooks keep error-feedback residuals: a hook created from its plugin's
// table on a Gloo communicator (one rank per process) reduces a few steps
// of pseudo-random gradients; its residuals are then taken into a zero
// bucket of the same layout and averaged exactly, in double, over every
// rank's buffer, as a plain averaging allreduce would. Nothing is lost when
// the sum of the results plus that mean is the sum of the true means.
#pragma once

#include <ddph/ddph.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/shaped_bucket.h"

namespace ddph_test {

struct FlushCase {
  const char* family;
  const char* hook;
  // Options as YAML text; the hook's defaults fill the rest, as the loader's.
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<Shape> shapes;  // the bucket's parameters, back to back
  int steps = 5;
};

// Where the hook finds each bucket's buffer. The host (the default) lends
// the test's vector itself; another place (GPU memory,
// residual_flush_gpu.h) lends a copy and copies the result back, so the
// same arithmetic checks a hook's other path.
class BufferPlace {
 public:
  virtual ~BufferPlace() = default;
  // Called once in each rank's process before its first bucket; "" or why
  // the rank cannot go on.
  virtual std::string prepare(int /*rank*/) { return std::string(); }
  // Calls use(b') where b' is b with its buffer in this place holding
  // data's values; once use returns and the hook's work on b' is done,
  // data holds what the buffer holds.
  virtual void lend(const ddph_bucket_t& b, std::vector<float>& data,
                    const std::function<void(const ddph_bucket_t&)>& use) {
    (void)data;
    use(b);
  }
};

// What one rank saw, over every element of the bucket.
struct FlushOutcome {
  bool offered = false;           // the table is 1.10-sized and take_residual is not NULL
  bool first_empty = false;       // the first take_residual left the zero bucket zero
  double flushed = 0;             // worst |sum of results + flushed mean - sum of true means|
  double unflushed = 0;           // the same without the flushed mean: what dropping loses
  double scale = 0;               // max |sum of true means|
  bool second_empty = false;      // a second take_residual leaves a zero bucket zero
  bool unseen_unchanged = false;  // an index never reduced: the buffer bit for bit
  // Before the flush: a bucket of another length at the same index came
  // back DDPH_INVALID_ARGUMENT naming the bucket, unchanged.
  bool other_layout_refused = false;
};

// Runs c on this rank (a run_ranks body: the ranks meet over a file store
// in dir) with every bucket lent from `place`, and fills *out; returns 0,
// or non-zero after printing why.
int run_flush_case(const FlushCase& c, int rank, int world, const std::string& dir,
                   BufferPlace& place, FlushOutcome* out);

// c on 2 ranks, as a gtest expectation. With `residual` (error feedback on):
// the flushed mean restores the sum to within `rounding` on every element,
// dropping it would have lost more than 100 times that, and the residual
// is gone after the first take. Without: the hook keeps nothing and every
// take leaves its bucket as it was. make_place gives each rank's process
// its place (none: the host).
void expect_flush_keeps_the_sum(
    const FlushCase& c, bool residual, double rounding,
    const std::function<std::unique_ptr<BufferPlace>()>& make_place = nullptr);

}  // namespace ddph_test
