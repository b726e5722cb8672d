// Every hook of every in-tree family as a YAML hook block, with what it does
// to NaN/Inf (documented in docs/<family>.md) and how close its mean of a
// clean bucket is to the exact one; shared by the NaN/Inf and the edge-size
// tests.
#pragma once

#include <ddph/ddph.h>

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ddph_test {

enum class NonFinite {
  kAsAllreduce,        // bit for bit plain allreduce's result, NaN/Inf included
  kElementwise,        // NaN/Inf where allreduce puts them; other elements as on a clean bucket
  kAllreduceInMatrix,  // the parameter views (matrices) holding NaN/Inf: allreduce's result
                       // there, bit for bit; other views exactly as on a clean bucket
  kReported,           // DDPH_NONFINITE on every rank
  kLocal,              // no communication: every rank keeps its own bucket
};

struct HookCase {
  const char* name;  // test name
  const char* hook;  // YAML `hook:` block, indented two spaces
  NonFinite nonfinite;
  double tolerance;           // |result - exact mean| of a clean bucket, relative to max |x|
  bool result_in_params;      // DDPH_HOOK_RESULT_ELSEWHERE: the mean lands in params[i].data
  bool steps_params = false;  // an optimizer steps params[i].data with the mean
};

const std::vector<HookCase>& hook_cases();
inline void PrintTo(const HookCase& c, std::ostream* os) {
  *os << c.name;
}

// "comm: ..." + "hook:\n" + c.hook, with a 20 s timeout.
std::string case_yaml(const HookCase& c);

// A float32 bucket with one parameter view per (rows, cols) entry, packed in
// order, whose tensors are lent too (slices of `param`, 1.0 each):
// optimizer hooks step them, allreduce_upcast writes the fp32 mean there.
struct ViewBucket {
  ViewBucket(std::vector<float> values, const std::vector<std::pair<int64_t, int64_t>>& views);
  ViewBucket(const ViewBucket&) = delete;
  ViewBucket& operator=(const ViewBucket&) = delete;
  std::vector<float> data, param;  // never empty, so data() is never NULL
  int64_t shape[1];
  std::vector<std::array<int64_t, 2>> view_shapes;
  std::vector<ddph_param_t> views;
  ddph_bucket_t b{};
};

// Deterministic values in [-2, 2) that no 16-bit type holds exactly.
float grad_value(int rank, size_t i);

}  // namespace ddph_test
