// Whether the ranks are making the same collective call: the words that
// describe a call, and the message that names the calls of ranks that
// differ. comm_mpi checks every collective with them; the loader's strict
// bucket check (loader/checked_comm.h) checks every call a hook makes.
//
// MPI matches collectives by their order alone: ranks that disagree on a call's length,
// dtype, op or root get MPI_ERR_TRUNCATE, which Open MPI's nonblocking
// collectives raise on MPI_COMM_WORLD's handler and so abort the process, or
// different results and no error at all (SUM on one rank, MAX on another).
// So every collective first sums a few words from every rank, which show
// whether all ranks made this rank's call; only when they did not are the
// calls gathered, to name the difference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddph {

enum class CallKind : int64_t {
  kAllreduce = 1,
  kAllgather,
  kReduceScatter,
  kBroadcast,
  kBarrier,
  kAlltoallv,
  kSplit
};

// What the ranks must agree on; -1 where the call has no such argument.
// alltoallv's counts differ between ranks by design: they are checked pair
// by pair through the terms instead.
struct CallShape {
  int64_t kind = 0;
  int64_t dtype = -1;  // ddph::DType
  int64_t numel = -1;
  int64_t op = -1;  // ddph_reduce_op_t
  int64_t root = -1;
};
constexpr int kShapeWords = 5;
static_assert(sizeof(CallShape) == kShapeWords * sizeof(int64_t), "gathered as int64 words");

// One rank's contribution, summed over ranks (modulo 2^64): a digest of the
// shape, a second, unrelated digest of it, and alltoallv's send and receive
// counts as one term per (sender, receiver) pair each.
constexpr int kTermWords = 4;
struct AgreementTerms {
  uint64_t v[kTermWords] = {};
};

// send_counts and recv_counts: alltoallv's, world entries each; NULL otherwise.
AgreementTerms agreement_terms(const CallShape& shape, int rank, int world,
                               const int64_t* send_counts, const int64_t* recv_counts);
// Whether the sums over all ranks show every rank making `mine`'s call with
// matching counts. A chance pass needs 64-bit digests to collide.
bool all_agree(const AgreementTerms& mine, const AgreementTerms& sum, int world);
// The message for ranks that do not agree, from every rank's shape.
std::string describe_disagreement(const std::vector<CallShape>& shapes, int rank);
// A reduce op in words: "SUM", "AVG", "MAX", "MIN", or "?" for another value.
const char* reduce_op_name(int64_t op);
// One call in words: "allreduce SUM of 1000 float32".
std::string describe_call(const CallShape& shape);
// Whether two ranks' shapes are the same call.
bool same_call(const CallShape& a, const CallShape& b);

}  // namespace ddph
