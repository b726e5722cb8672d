// Checks that the ranks of a session run the same job on the same buckets.
// Without them a mismatch reaches the communicator: Gloo aborts the whole
// process when a message is longer than the buffer posted for it, and
// equal-sized mismatches silently reduce the wrong data.
#pragma once

#include <ddph/ddph.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm/call_agreement.h"
#include "loader/job/config.h"
#include "loader/job/job.h"

namespace ddph {
namespace loader {

// The job's hook chains as canonical text: every family, hook and option
// value (in schema order) of the main chain and of each rule, with the
// rules' sizes, and comm.bucket_check (ranks that check differently would
// wait for each other's exchanges). The communicator's options are left
// out: they may legitimately differ per rank (a host name to listen on).
std::string job_signature(const Job& job);

// Collective, when the session opens: every rank's signature digest is
// gathered; if any differs from rank 0's, every rank throws
// DDPH_INVALID_ARGUMENT naming the ranks that differ. local_error: why this
// rank's own settings (its environment) are refused, or empty; when any rank
// has one, every rank throws DDPH_INVALID_ARGUMENT with every such rank's
// reason, so that no peer waits for a rank that cannot run the job.
void agree_on_job(ddph_comm_t* comm, const Job& job, const std::string& local_error = "");

// What must be the same on every rank for a bucket to be reduced with its
// peers: index, step, element count, dtype (code << 32 | bits << 16 |
// lanes) and device type.
struct BucketFingerprint {
  int64_t index = -1, step = -1, numel = -1, dtype = -1, device = -1;
  bool operator==(const BucketFingerprint& o) const {
    return index == o.index && step == o.step && numel == o.numel && dtype == o.dtype &&
           device == o.device;
  }
  bool operator!=(const BucketFingerprint& o) const { return !(*this == o); }
};
constexpr size_t kFingerprintWords = 5;
static_assert(sizeof(BucketFingerprint) == kFingerprintWords * sizeof(int64_t),
              "exchanged as words");
BucketFingerprint fingerprint_of(const ddph_bucket_t& bucket);
// The bucket buffer's size in bytes.
uint64_t bucket_bytes(const ddph_bucket_t& bucket);
// "bucket 3 of step 1 (1000 float32 elements on device type 1)"; index -1
// reads "no bucket (while the hooks were created)".
std::string describe_bucket(const BucketFingerprint& fp);

// One rank's word in a check exchange on the control communicator. Every
// exchange sends one record, whatever it checks, so that ranks at
// different points of their sequences still pair, and see that they differ.
enum class CheckKind : int64_t {
  kBuckets = 1,  // before a bucket runs: the buckets since the last agreement
  kCall = 2,     // a hook's collective (strict)
};
struct CheckRecord {
  int64_t kind = 0;
  uint64_t digest = 0;  // of `count` fingerprints, the last one `bucket`
  int64_t count = 0;
  BucketFingerprint bucket;
  CallShape call;  // kCall only
};
constexpr size_t kCheckRecordWords = 3 + kFingerprintWords + kShapeWords;
static_assert(sizeof(CheckRecord) == kCheckRecordWords * sizeof(int64_t), "exchanged as words");

// Every rank's record, gathered on comm (one allgather).
std::vector<CheckRecord> gather_records(ddph_comm_t* comm, const CheckRecord& mine);
// The first rank (lowest) whose record differs from this rank's, or -1.
int first_differing_rank(const std::vector<CheckRecord>& all, int rank);
// Why two records differ, for records of different kinds or, in strict
// mode, different buckets or calls: "this rank (rank 0) runs bucket ...,
// where rank 1 makes a call: ...".
std::string describe_records(const CheckRecord& mine, int rank, const CheckRecord& theirs,
                             int other);

// When comm.bucket_check: auto compares (docs/benchmarks.md has the
// measurement behind the numbers): before any bucket of at least
// check_before_bytes, and before the bucket that completes a batch of
// batch_buckets buckets or batch_bytes bytes since the last comparison, or
// ends a step (is_last).
struct AutoCheckPolicy {
  uint64_t check_before_bytes = uint64_t(32) << 20;
  uint64_t batch_bytes = uint64_t(32) << 20;
  size_t batch_buckets = 1024;
};

// The fingerprints since the last comparison, their digest and bytes.
class PendingBatch {
 public:
  void add(const BucketFingerprint& fp, uint64_t bytes);
  // Whether auto compares before the bucket just added (of `bytes` bytes).
  bool due(const AutoCheckPolicy& policy, uint64_t bytes, bool is_last) const;
  void clear();
  const std::vector<BucketFingerprint>& list() const { return list_; }
  uint64_t digest() const { return digest_; }

 private:
  std::vector<BucketFingerprint> list_;
  uint64_t digest_ = 0;
  uint64_t bytes_ = 0;
};

// One comparison of every rank's batch, the last entry being the bucket
// about to run (collective on control; control's size > 1). Returns when
// all ranks have the same. Otherwise throws DDPH_INVALID_ARGUMENT on every
// rank: auto names the first bucket that differs (a second exchange of up
// to batch_buckets fingerprints per rank), strict the buckets about to run.
// Where a rank was making a hook's call instead (strict), *out_of_step is
// set: the ranks are no longer in step.
void compare_batch(ddph_comm_t* control, const PendingBatch& batch, BucketCheck mode,
                   size_t batch_buckets, bool* out_of_step);

// Checks, before each bucket's hook runs, that every rank runs the same
// bucket (comm.bucket_check, docs/config.md), on the worker's thread: strict,
// off, and auto where check_ahead.h does not apply. [serialized]: the
// session's worker thread only.
class BucketAgreement {
 public:
  // survives_mismatch: whether the hooks' communicator fails cleanly (an
  // error on every rank, not an abort of the process) when ranks make calls
  // of different lengths. Where it does not, auto checks a new layout
  // before its bucket runs, as off does.
  void configure(BucketCheck mode, bool survives_mismatch, AutoCheckPolicy policy = {});
  BucketCheck mode() const { return mode_; }
  // Collective when a comparison is due; throws DDPH_INVALID_ARGUMENT on
  // every rank when the ranks differ, naming this rank's bucket and
  // another's. The bucket then does not run. fp and bytes: the bucket's,
  // computed once when it entered the session.
  void before_hook(ddph_comm_t* control, const BucketFingerprint& fp, uint64_t bytes, bool is_last);
  // After a mismatch that found a rank making a hook's call where this one
  // checks a bucket: the ranks are out of step, and the session breaks.
  bool out_of_step() const { return out_of_step_; }

 private:
  using Layout = std::array<int64_t, 4>;  // index, numel, dtype (code, bits, lanes), device type
  // off: the check of a new or changed layout, as before comm.bucket_check.
  void check_layout(ddph_comm_t* control, const BucketFingerprint& fp);

  BucketCheck mode_ = BucketCheck::kOff;
  bool survives_mismatch_ = false;
  AutoCheckPolicy policy_;
  bool out_of_step_ = false;
  std::map<uint64_t, Layout> agreed_;
  PendingBatch pending_;
};

}  // namespace loader
}  // namespace ddph
