#include "plugins/zero/sharding_plan.h"

#include <string>
#include <utility>

#include "core/base/error.h"
#include "core/comm/comm_call.h"
#include "core/hook/allgather_v.h"

namespace ddph {
namespace zero {

ShardingPlan::ShardingPlan(ddph_comm_t* comm, const ZeroOptions& options, const char* who)
    : comm_(comm),
      who_(who),
      protocol_(options.protocol),
      shard_buckets_(options.shard_buckets),
      rank_(comm_rank(comm)),
      world_(comm_size(comm)) {}

const BucketLayout* ShardingPlan::same_as_known(const BucketLayout& now) const {
  auto known = layouts_.find(now.index);
  return known != layouts_.end() && known->second == now ? &known->second : nullptr;
}

bool ShardingPlan::regroups(const BucketLayout& now, size_t buckets_this_step) const {
  const bool known = layouts_.count(now.index) != 0;
  if (!known && hash_ == 0) return false;
  DDPH_CHECK(buckets_this_step == 0, DDPH_INVALID_ARGUMENT,
             who_ << ": bucket " << now.index
                  << (known ? " holds other parameters than at step " : " is new since step ")
                  << first_step_
                  << ", but not at the step's first bucket; a host that regroups its "
                     "parameters must change its buckets between steps");
  return true;
}

void ShardingPlan::forget() {
  layouts_.clear();
  pieces_.clear();
  shares_.clear();
  hash_ = 0;
}

const BucketLayout& ShardingPlan::add(BucketLayout now, uint64_t step) {
  if (layouts_.empty()) first_step_ = step;
  agree_on(now);
  // The same on every rank from here on (the layouts agree).
  check_keys(now);
  const BucketLayout& l = layouts_.emplace(now.index, std::move(now)).first->second;
  if (protocol_ == Protocol::kReduceScatter) {
    pieces_[l.index] = range_pieces(l, world_);
  } else if (!shard_buckets_) {
    const Share whole{l.index, 0, l.keys.size(), int(l.index % uint64_t(world_))};
    shares_[l.index] = {whole};
    pieces_[l.index] = share_pieces(l, shares_[l.index]);
  }
  return l;
}

// Ranks that disagree on a bucket would step and send different
// parameters: every rank's layout hash is compared before any gradient
// moves. (Their options, bits included, were compared when the session
// opened.)
void ShardingPlan::agree_on(const BucketLayout& l) const {
  if (world_ == 1) return;
  const uint64_t mine = layout_hash(l);
  const std::vector<uint64_t> all = allgather_each(comm_, mine);
  for (int r = 0; r < world_; ++r)
    DDPH_CHECK(all[size_t(r)] == mine, DDPH_INVALID_ARGUMENT,
               who_ << ": rank " << r << " and rank " << rank_ << " disagree on bucket " << l.index
                    << "'s parameters (their count, sizes, offsets or ids); every rank must "
                       "hand the hook the same buckets");
}

// A new bucket layout (the same on every rank): parameters to step, each
// key once in the bucket and in no other bucket of the step. Two
// parameters under one id would share one optimizer state.
void ShardingPlan::check_keys(const BucketLayout& now) const {
  DDPH_CHECK(!now.keys.empty(), DDPH_INVALID_ARGUMENT,
             who_ << ": bucket " << now.index << " (" << now.n
                  << " gradient elements) carries no parameters, so none of its gradients "
                     "would be stepped, while the host skips its own optimizer step for "
                     "this hook; lend each bucket's parameters (ddph_bucket_t.params)");
  std::map<optim::ParamKey, size_t> seen;
  for (size_t i = 0; i < now.keys.size(); ++i) {
    const auto first = seen.emplace(now.keys[i], i);
    DDPH_CHECK(first.second, DDPH_INVALID_ARGUMENT,
               who_ << ": bucket " << now.index << " holds " << optim::key_text(now.keys[i])
                    << " twice (params[" << first.first->second << "] and params[" << i
                    << "]); each parameter needs an id of its own (ddph_bucket_t.param_ids), "
                       "or two parameters would share one optimizer state");
  }
  for (const auto& kv : layouts_) {
    if (kv.first == now.index) continue;
    for (const optim::ParamKey& k : kv.second.keys)
      DDPH_CHECK(seen.count(k) == 0, DDPH_INVALID_ARGUMENT,
                 who_ << ": " << optim::key_text(k) << " is in bucket " << kv.first
                      << " and in bucket " << now.index
                      << "; each parameter needs an id of its own (ddph_bucket_t.param_ids), "
                         "or two parameters would share one optimizer state");
  }
}

void ShardingPlan::fix_hash() {
  if (hash_ != 0) return;
  std::vector<const BucketLayout*> all;
  for (const auto& kv : layouts_) all.push_back(&kv.second);
  if (protocol_ == Protocol::kAllreduce && shard_buckets_) assign_shards();
  hash_ = layouts_hash(all, world_, int(protocol_) + 2 * shard_buckets_);
  if (hash_ == 0) hash_ = 1;  // 0 means "not fixed yet"
}

// shard_buckets: PyTorch's assignment over every bucket of the step.
void ShardingPlan::assign_shards() {
  std::vector<std::vector<size_t>> numels;
  std::vector<uint64_t> indices;
  for (const auto& kv : layouts_) {
    numels.push_back(kv.second.numels);
    indices.push_back(kv.first);
  }
  for (Share s : assign_buckets(numels, world_, true)) {
    s.bucket = indices[s.bucket];
    shares_[s.bucket].push_back(s);
  }
  for (const auto& kv : shares_) pieces_[kv.first] = share_pieces(layouts_.at(kv.first), kv.second);
}

Range ShardingPlan::kept_span(const BucketLayout& l) const {
  if (protocol_ == Protocol::kReduceScatter) return rank_range(l.n, world_, rank_);
  if (owners_known(l.index)) return owned_span(l, pieces_.at(l.index), rank_);
  return Range{0, l.n};
}

}  // namespace zero
}  // namespace ddph
