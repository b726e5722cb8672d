// Which rank steps which elements of each bucket: the buckets' layouts as
// the ranks agreed on them, each bucket's pieces (and, protocol allreduce,
// its shares), and their hash, which a shard is saved under. Every rank
// walks the same buckets in the same order and builds the same plan, so no
// ownership is ever sent; the layouts themselves are compared across ranks
// once each (a collective), so ranks that disagree fail instead of stepping
// different parameters.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "plugins/zero/assignment.h"
#include "plugins/zero/layout.h"
#include "plugins/zero/options.h"

namespace ddph {
namespace zero {

class ShardingPlan {
 public:
  // `who` (a literal: the hook) is named in errors.
  ShardingPlan(ddph_comm_t* comm, const ZeroOptions& options, const char* who);

  // The plan's layout of now's bucket when it is `now`; NULL for a bucket
  // that is new or holds other parameters.
  const BucketLayout* same_as_known(const BucketLayout& now) const;
  // Whether `now` (not the known layout) regroups a plan made already: a
  // bucket that changed, or a new one after the first step's end. Then the
  // caller re-cuts the optimizer state and calls forget(). A host may
  // regroup between steps (PyTorch DDP rebuilds its buckets after the first
  // one), so it throws DDPH_INVALID_ARGUMENT when the change shows after
  // the step's first bucket, once something of the step may have been
  // stepped under the old layout.
  bool regroups(const BucketLayout& now, size_t buckets_this_step) const;
  // Forgets every layout, piece and share, and the hash.
  void forget();
  // Adds now's bucket, first seen at `step`: its layout compared across
  // the ranks (a collective) and checked, then its pieces where they are
  // known already (all but shard_buckets' before fix_hash()).
  const BucketLayout& add(BucketLayout now, uint64_t step);
  // Once the first step's buckets are all known (its last bucket): their
  // hash and, with shard_buckets, their owners. Nothing once fixed.
  void fix_hash();

  uint64_t hash() const { return hash_; }  // 0: not fixed yet
  bool owners_known(uint64_t index) const { return pieces_.count(index) != 0; }
  const BucketLayout& layout(uint64_t index) const { return layouts_.at(index); }
  const std::map<uint64_t, BucketLayout>& layouts() const { return layouts_; }
  const std::vector<Piece>& pieces(uint64_t index) const { return pieces_.at(index); }
  const std::vector<Share>& shares(uint64_t index) const { return shares_.at(index); }
  // The gradient elements of l this rank keeps when its step is deferred:
  // its range (reduce_scatter), the span of its pieces, or, before the
  // owners are known (shard_buckets' first step), the whole bucket.
  Range kept_span(const BucketLayout& l) const;

 private:
  void agree_on(const BucketLayout& l) const;
  void check_keys(const BucketLayout& now) const;
  void assign_shards();

  ddph_comm_t* comm_;
  const char* who_;
  Protocol protocol_;
  bool shard_buckets_;
  int rank_, world_;
  std::map<uint64_t, BucketLayout> layouts_;
  std::map<uint64_t, std::vector<Piece>> pieces_;
  std::map<uint64_t, std::vector<Share>> shares_;
  uint64_t hash_ = 0, first_step_ = 0;
};

}  // namespace zero
}  // namespace ddph
