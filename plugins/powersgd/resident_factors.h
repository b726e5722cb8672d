// P, Q and the error buffer of each bucket index (PyTorch's p_memory_dict,
// q_memory_dict and error_dict) in the memory the steps run in, on core's
// resident-state kit (core/memory/resident_floats.h): host memory or the
// buckets' GPU, allocated once per index and kept; a checkpoint's values
// move in when a step first touches an index in that memory.
//
// What PowerSGD adds to the kit: whether P and Q are present (cleared
// without warm start, their memory kept for the next draw), and on the host
// the deferred error (math_ops.h's defers_error): see defer_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"
#include "plugins/powersgd/bucket_plan.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/state.h"

namespace ddph {
namespace powersgd {

// P and Q of a bucket index in the step's memory.
struct Factors {
  float* p;
  float* q;
};

class ResidentFactors {
 public:
  ResidentFactors() : arrays_("powersgd") {}

  // The next step runs in at's memory with ops' arithmetic. A deferred
  // error is settled on leaving the host; each index's arrays follow when
  // a step touches it.
  void use(const Where& at, LowRankOps& ops);

  // The error buffer of a bucket index, n floats: zeros on first use. A
  // remembered buffer of another length (a checkpoint of another model) is
  // an error rather than noise added to the wrong elements. `name` (the
  // hook's) names it in errors.
  float* error_buffer(uint64_t index, size_t n, const char* name);
  // Whether the index has P and Q from an earlier step (or a checkpoint).
  bool has_factors(uint64_t index) const { return with_factors_.count(index) != 0; }
  // A zero P of p_numel floats and Q = q_host (drawn on the host: PyTorch's
  // generator), remembered as the bucket's.
  Factors fresh_factors(uint64_t index, size_t p_numel, const std::vector<float>& q_host);
  // The remembered P and Q; throws unless they have the lengths the layout
  // at `rank` needs.
  Factors remembered_factors(uint64_t index, size_t p_numel, size_t q_numel, int rank,
                             const char* name);
  // Every index's P and Q absent (PyTorch clears them after each step
  // without warm start). Their arrays keep their memory for the next draw.
  void forget_factors() { with_factors_.clear(); }

  // The deferred error: after a step with error feedback on the host, the
  // error buffer of a bucket keeps M, and the error is M - P Q^T over
  // `matrices` with that step's P and Q (copies). Checkpoints, and a bucket
  // that moves to a GPU, get it settled.
  struct Deferred {
    std::vector<MatrixSlot> matrices;
    std::vector<float> p, q;
  };
  void defer_error(uint64_t index, const std::vector<MatrixSlot>& matrices, const Factors& f,
                   size_t p_numel, size_t q_numel);
  // The deferred error of `index` if it is deferred over these matrices;
  // NULL if it is not deferred. If it is deferred over other matrices (the
  // layout changed), it is settled into the error buffer first and NULL is
  // returned. Call forget_deferred once the error buffer holds the new M.
  const Deferred* deferred_error(uint64_t index, const std::vector<MatrixSlot>& matrices);
  void forget_deferred(uint64_t index) { deferred_.erase(index); }

  // The error of bucket `index`, settled, into *host, and forgotten (the
  // next step starts from zeros; P and Q stay): take_residual (ABI 1.10).
  // False, and nothing changes, when the index keeps no error. `numel` is
  // the length its layout needs: another one is an error naming `name`.
  bool take_error(uint64_t index, size_t numel, const char* name, std::vector<float>* host);

  // Host copies of every index's arrays, with errors settled (checkpoints:
  // from a GPU, waiting for the steps ordered before).
  std::map<uint64_t, SavedBucket> to_host() const;
  // The arrays become `host` (a loaded checkpoint); steps upload them.
  void replace(std::map<uint64_t, SavedBucket> host);

 private:
  enum { kP, kQ, kError };
  using Table = ResidentTable<uint64_t, 3>;
  // index's arrays, in the memory of the step.
  Table::Arrays& arrays(uint64_t index);

  Table arrays_;
  std::set<uint64_t> with_factors_;        // the indices whose P and Q are present
  std::map<uint64_t, Deferred> deferred_;  // host buckets only
  Where at_{};
  LowRankOps* ops_ = nullptr;
};

}  // namespace powersgd
}  // namespace ddph
