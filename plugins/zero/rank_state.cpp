#include "plugins/zero/rank_state.h"

#include <random>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/comm/comm_call.h"
#include "core/hook/allgather_v.h"
#include "core/optim/state_blob.h"
#include "plugins/zero/step_checks.h"

namespace ddph {
namespace zero {
namespace {

// A fresh run id (never 0, which means "unknown"): each rank draws one, and
// the ranks take rank 0's at the first step.
uint64_t fresh_run_id() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t(device()) << 32) ^ uint64_t(device());
  return id;
}

}  // namespace

RankState::RankState(ddph_comm_t* comm, const optim::OptimConfig& optim, const char* who)
    : comm_(comm),
      optim_(optim),
      who_(who),
      rank_(comm_rank(comm)),
      world_(comm_size(comm)),
      device_(who),
      run_id_(fresh_run_id()),
      residuals_(who) {}

void RankState::step(const BucketLayout& l, const Piece& p, float* param, const float* grad,
                     const Where& at) {
  const PieceKey key{l.keys[p.param], p.begin};
  PieceState& st = state_for(key, l.numels[p.param], p);
  device_.step(key, st.state, optim_, at, param, grad, p.count);
}

PieceState& RankState::state_for(const PieceKey& key, size_t numel, const Piece& p) {
  auto found = states_.find(key);
  if (found != states_.end()) {
    DDPH_CHECK(found->second.count == p.count, DDPH_INVALID_ARGUMENT, who_ << ": " << kOtherLayout);
    return found->second;
  }
  DDPH_CHECK(!from_shard_ || states_.empty(), DDPH_INVALID_ARGUMENT, who_ << ": " << kOtherLayout);
  PieceState fresh;
  fresh.count = p.count;
  auto whole = full_.find(key.param);
  if (whole != full_.end()) fresh = slice_state(whole->second, numel, p.begin, p.count, who_);
  return states_.emplace(key, std::move(fresh)).first->second;
}

void RankState::recut(uint64_t plan_hash) {
  Shard mine;
  mine.kind = optim_.kind;
  mine.world = uint32_t(world_);
  mine.rank = uint32_t(rank_);
  mine.layout_hash = plan_hash;
  device_.download_into(&states_, state_of);
  device_.clear();
  mine.pieces = std::move(states_);
  std::vector<Shard> shards;
  if (world_ == 1) {
    shards.push_back(std::move(mine));
  } else {
    for (const std::string& blob : allgather_v(comm_, encode_shard(mine)))
      shards.push_back(decode_shard(blob.data(), blob.size(), optim_.kind, who_));
  }
  optim::StateMap joined = join_pieces(shards, who_);
  // A full state loaded since the last step has not been cut yet: its
  // parameters keep it (what was stepped since wins, though nothing was).
  for (auto& kv : full_) joined.emplace(kv.first, std::move(kv.second));
  full_ = std::move(joined);
  states_.clear();
  from_shard_ = false;
  shard_hash_ = 0;
}

std::string RankState::save(uint64_t plan_hash) const {
  // A loaded full state not yet cut into pieces (no step since the load):
  // saved as it came, so nothing of it is lost.
  if (!full_.empty()) return optim::encode_state(full_, optim_.kind);
  Shard s;
  s.kind = optim_.kind;
  s.world = uint32_t(world_);
  s.rank = uint32_t(rank_);
  s.layout_hash = plan_hash != 0 ? plan_hash : shard_hash_;
  // A shard loaded since the last step is saved as the run it came from.
  s.run_id = pending_load_ ? loaded_run_ : run_agreed_ ? run_id_ : 0;
  s.pieces = states_;
  device_.download_into(&s.pieces, state_of);
  for (const auto& kv : residuals_) s.residuals[kv.first] = kv.second[kOwnResidual].to_host();
  return encode_shard(s);
}

void RankState::load(LoadedState& loaded, uint64_t plan_hash) {
  // bits 8 or 4: this rank's own shard brings back its residuals; joined
  // shards (another world, or a consolidated state) and version 1 shards
  // start them at zero, as the first step did (docs/zero.md). Nothing
  // changes if the checkpoint is refused.
  if (loaded.single_shard) {
    Shard& s = loaded.shard;
    DDPH_CHECK(s.world == uint32_t(world_) && s.rank == uint32_t(rank_), DDPH_INVALID_ARGUMENT,
               who_ << ": the checkpoint is the shard of rank " << s.rank << " of a world of "
                    << s.world << ", but this is rank " << rank_ << " of " << world_
                    << "; to load at another world size or rank, load every rank's shard "
                       "joined (docs/zero.md)");
    DDPH_CHECK(plan_hash == 0 || s.layout_hash == 0 || s.layout_hash == plan_hash,
               DDPH_INVALID_ARGUMENT, who_ << ": " << kOtherLayout);
    device_.clear();
    states_ = std::move(s.pieces);
    residuals_.clear();
    for (auto& kv : s.residuals) residuals_[kv.first][kOwnResidual].set_host(std::move(kv.second));
    shard_hash_ = s.layout_hash;
    from_shard_ = true;
    full_.clear();
    loaded_run_ = s.run_id;
  } else {
    device_.clear();
    states_.clear();
    residuals_.clear();
    full_ = std::move(loaded.full);
    from_shard_ = false;
    shard_hash_ = 0;
    loaded_run_ = loaded.run_id;
  }
  // Checked at the next step's end, against the run's buckets and every
  // rank's load, before anything moves.
  pending_load_ = true;
}

std::string RankState::loaded_problem(const ShardingPlan& plan) const {
  if (from_shard_ && shard_hash_ != 0 && shard_hash_ != plan.hash()) return kOtherLayout;
  return full_state_mismatch(full_, plan.layouts());
}

void RankState::agree_on_run(uint64_t run) {
  run_id_ = run;
  run_agreed_ = true;
  pending_load_ = false;
}

void RankState::check_shard_fits(uint64_t plan_hash) const {
  DDPH_CHECK(shard_hash_ == 0 || shard_hash_ == plan_hash, DDPH_INTERNAL,
             who_ << ": " << kOtherLayout);
}

}  // namespace zero
}  // namespace ddph
