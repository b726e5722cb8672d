// What a zero hook's rank keeps from step to step and saves: the optimizer
// state of the pieces it steps (on the host, or on the bucket's GPU), a
// loaded checkpoint not yet cut into pieces, the run its state belongs to,
// and (protocol reduce_scatter, bits 8 or 4) each bucket's error feedback.
// A checkpoint is this rank's shard (shard_state.h), or the full state as
// it was loaded when no step has cut it since.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"
#include "core/optim/device_states.h"
#include "core/optim/functional_optim.h"
#include "plugins/zero/layout.h"
#include "plugins/zero/shard_state.h"
#include "plugins/zero/sharding_plan.h"

namespace ddph {
namespace zero {

// A bucket's error feedback (kOwnResidual) and the spare the next residual
// is written into (kSpareResidual), kept only when the bucket was finite.
enum ResidualSlot { kOwnResidual = 0, kSpareResidual = 1 };
using Residuals = ResidentTable<uint64_t, 2>;  // by bucket index

class RankState {
 public:
  // `who` (a literal: the hook) is named in errors.
  RankState(ddph_comm_t* comm, const optim::OptimConfig& optim, const char* who);

  // One optimizer step of piece p of l: its elements of the parameter at
  // param and their gradient at grad, both in at's memory (on a GPU a
  // kernel on at's stream over the piece's device slots).
  void step(const BucketLayout& l, const Piece& p, float* param, const float* grad,
            const Where& at);

  // The buckets were regrouped: every rank's pieces of the old plan (of
  // hash plan_hash) are gathered into every parameter's whole state, to be
  // cut again for the new plan as its pieces are first stepped. Collective:
  // every rank meets the same changed bucket.
  void recut(uint64_t plan_hash);
  // The step's end: every owned piece took its slice of a loaded or re-cut
  // whole state.
  void end_step() { full_.clear(); }

  // The checkpoint: this rank's shard under plan_hash (0: no plan yet).
  std::string save(uint64_t plan_hash) const;
  // Takes a decoded checkpoint (its pieces and residuals are moved out).
  // A single shard must be this rank's of this world, and of the plan's
  // hash once there is one; throws DDPH_INVALID_ARGUMENT before anything
  // changes otherwise. Checked whole at the next step (loaded_problem).
  void load(LoadedState& loaded, uint64_t plan_hash);

  // Since a load, until the step that checked it.
  bool pending_load() const { return pending_load_; }
  // What of the pending load does not fit the plan, or "".
  std::string loaded_problem(const ShardingPlan& plan) const;
  // This run's id (drawn at create, then the agreed one), and the run of
  // the shards loaded since the last step (0: none, or unknown).
  uint64_t run_id() const { return run_id_; }
  uint64_t loaded_run() const { return pending_load_ ? loaded_run_ : 0; }
  // The ranks agreed that the state belongs to `run` (after a whole step's
  // check): the load, if any, is checked.
  void agree_on_run(uint64_t run);
  // The step about to move parameters is cut under plan_hash: a loaded
  // shard's layout must be it (agreed before; DDPH_INTERNAL otherwise).
  void check_shard_fits(uint64_t plan_hash) const;

  Residuals& residuals() { return residuals_; }

  static constexpr const char* kOtherLayout =
      "the checkpoint is a shard of another bucket layout or protocol; its optimizer state "
      "belongs to other parameters. Load every rank's shard joined (docs/zero.md), which "
      "reshards to any layout";

 private:
  PieceState& state_for(const PieceKey& key, size_t numel, const Piece& p);
  static optim::ParamState& state_of(PieceState& p) { return p.state; }

  ddph_comm_t* comm_;
  optim::OptimConfig optim_;
  const char* who_;
  int rank_, world_;
  // Each piece's step count, and its buffers unless a GPU has them
  // (device_).
  PieceMap states_;
  optim::DeviceStates<PieceKey> device_;
  // A loaded checkpoint: every parameter's whole state, sliced into pieces
  // as they are first stepped; or (from_shard_) a shard, whose plan hash
  // must match.
  optim::StateMap full_;
  bool from_shard_ = false;
  uint64_t shard_hash_ = 0;
  // Drawn at create, agreed (rank 0's, or the loaded shards') at the first
  // step; saved in every shard.
  uint64_t run_id_;
  bool run_agreed_ = false;
  bool pending_load_ = false;
  uint64_t loaded_run_ = 0;  // the loaded shards' run (0: unknown)
  Residuals residuals_;
};

}  // namespace zero
}  // namespace ddph
