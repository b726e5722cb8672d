// P, Q and the error buffer of each bucket index (PyTorch's p_memory_dict,
// q_memory_dict and error_dict), in the memory the steps run in: host
// memory, or the buckets' GPU, allocated once per index and kept. They meet
// the host only at the edges: a checkpoint's (or an earlier memory's)
// values move in when a step first touches an index, checkpoints copy them
// out, and a bucket that changes memory takes them through the host.
//
// On the host the error may also stay deferred between steps (math_ops.h's
// defers_error): see defer_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

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
  // `name` (the hook's, outliving this) names it in errors.
  explicit ResidentFactors(const char* name) : name_(name) {}
  ~ResidentFactors();
  ResidentFactors(const ResidentFactors&) = delete;
  ResidentFactors& operator=(const ResidentFactors&) = delete;

  // The steps run in ops' memory from now on (NULL: none yet). Arrays in
  // another memory go back to the host first (rare: a hook normally stays
  // on one device).
  void move_to(LowRankOps* ops);

  // The error buffer of a bucket index, n floats: zeros on first use. A
  // remembered buffer of another length (a checkpoint of another model) is
  // an error rather than noise added to the wrong elements.
  float* error_buffer(uint64_t index, size_t n);
  // Whether the index has P and Q from an earlier step (or a checkpoint).
  bool has_factors(uint64_t index) { return host_[index].has_pq; }
  // A zero P of p_numel floats and Q = q_host (drawn on the host: PyTorch's
  // generator), remembered as the bucket's.
  Factors fresh_factors(uint64_t index, size_t p_numel, const std::vector<float>& q_host);
  // The remembered P and Q; throws unless they have the lengths the layout
  // at `rank` needs.
  Factors remembered_factors(uint64_t index, size_t p_numel, size_t q_numel, int rank);
  // Every index's P and Q absent (PyTorch clears them after each step
  // without warm start). Resident arrays keep their memory for the next
  // fresh draw.
  void forget_factors();

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

  // Host copies of every index's arrays, with errors settled (checkpoints:
  // from a GPU, waiting for the steps ordered before).
  std::map<uint64_t, BucketMemory> to_host();
  // The arrays become `host` (a loaded checkpoint); the next step uploads them.
  void replace(std::map<uint64_t, BucketMemory> host);

 private:
  // A float array in ops_'s memory.
  struct Array {
    float* data = nullptr;
    size_t size = 0;
  };
  // P, Q and error of a bucket index while ops_'s memory holds them; the
  // host vectors of that index are empty meanwhile.
  struct Resident {
    Array p, q, error;
  };

  Resident& resident(uint64_t index);
  void fit(Array& a, size_t n);
  // Copies index's arrays to `m`, with its error settled.
  void download_into(uint64_t index, const Resident& r, BucketMemory& m);
  // error -= P Q^T over the deferred matrices (host memory).
  void settle(const Deferred& d, float* error);
  // Moves every resident array back into host_.
  void evict_to_host();
  void release_all();
  void check_length(size_t have, size_t want, uint64_t index, const char* what, int rank);

  const char* name_;
  std::map<uint64_t, BucketMemory> host_;  // what no memory of ops_ holds
  std::map<uint64_t, Resident> resident_;
  std::map<uint64_t, Deferred> deferred_;  // host buckets only; their error is resident
  LowRankOps* ops_ = nullptr;              // whose memory resident_ is in
};

}  // namespace powersgd
}  // namespace ddph
