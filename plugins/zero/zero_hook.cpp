#include "plugins/zero/zero_hook.h"

#include <string>
#include <utility>

#include "core/base/error.h"
#include "core/base/phase_span.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/param_view.h"
#include "plugins/zero/hooks.h"
#include "plugins/zero/shard_state.h"
#include "plugins/zero/step_checks.h"

namespace ddph {
namespace zero {

ZeroHook::ZeroHook(const ddph_hook_init_t& init, const char* name, bool interleaved)
    : name_(name),
      comm_(init.comm),
      options_(parse_zero_options(init, name)),
      rank_(comm_rank(init.comm)),
      world_(comm_size(init.comm)),
      plan_(init.comm, options_, name),
      state_(init.comm, options_.optim, name),
      schedule_(interleaved, name),
      protocol_(make_protocol(init, options_, state_.residuals(), name)) {}

void ZeroHook::run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) {
  DDPH_CHECK(dtype == DType::F32, DDPH_UNSUPPORTED,
             name_ << ": bucket dtype " << dtype_name(dtype)
                   << " is not supported: the zero hooks step float32 gradients into float32 "
                      "parameters");
  const Where at = where_of(bucket);
  require_cuda_build(at, name_);
  schedule_.enter(bucket);
  lend_params(bucket);
  count_in(uint64_t(bucket.buffer.shape[0]) * sizeof(float));
  const BucketLayout* learned = nullptr;
  try {
    learned = &learn(bucket);
  } catch (const Error&) {
    // Refused on every rank alike (the layouts are compared first).
    schedule_.refused(bucket.is_last);
    throw;
  }
  const BucketLayout& layout = *learned;
  schedule_.counted();

  // Every protocol leaves the reduced gradients this rank steps in the
  // bucket buffer.
  protocol_->reduce(bucket, layout, at);
  const float* reduced = static_cast<const float*>(data_ptr(bucket.buffer));
  const bool owners_known = plan_.owners_known(layout.index);
  // The first step, and the first after a load or a regroup, is checked
  // whole before anything of it is stepped.
  const bool whole_step_checked = plan_.hash() == 0 || state_.pending_load();
  switch (schedule_.next(bucket.is_last, owners_known, whole_step_checked)) {
    case StepSchedule::Action::kStepNow:
      agree_before_stepping(false);
      step_and_share(layout, params_.data(), reduced, /*base=*/0, at);
      break;
    case StepSchedule::Action::kStepAll:
      // The kept buckets, then this one from its own buffers, with no copy
      // (all of a one-bucket step).
      agree_before_stepping(true);
      step_kept(at);
      step_and_share(layout, params_.data(), reduced, /*base=*/0, at);
      end_step();
      break;
    case StepSchedule::Action::kKeep:
      schedule_.keep(layout, bucket.step, params_, reduced, plan_.kept_span(layout), at);
      break;
    case StepSchedule::Action::kKeepAndStepAll:
      schedule_.keep(layout, bucket.step, params_, reduced, plan_.kept_span(layout), at);
      agree_before_stepping(true);
      step_kept(at);
      end_step();
      break;
  }
  done.ok();
}

// Every parameter is checked, the ones other ranks own too: this rank
// writes their broadcast or gathered values.
void ZeroHook::lend_params(const ddph_bucket_t& bucket) {
  params_.assign(bucket.num_params, nullptr);
  for (size_t i = 0; i < bucket.num_params; ++i) {
    try {
      params_[i] = param_f32_data(bucket, i, name_, "the parameter (its own tensor)",
                                  BucketMemory::kHostOrCuda);
    } catch (const Error& e) {
      std::string what = e.what();
      const std::string prefix = std::string(name_) + ": ";
      if (what.compare(0, prefix.size(), prefix) == 0) what.erase(0, prefix.size());
      schedule_.note_problem("bucket " + std::to_string(bucket.index) + " of step " +
                             std::to_string(bucket.step) + ": " + what);
    }
  }
}

const BucketLayout& ZeroHook::learn(const ddph_bucket_t& bucket) {
  BucketLayout now = layout_of(bucket);
  if (const BucketLayout* same = plan_.same_as_known(now)) return *same;
  if (plan_.regroups(now, schedule_.buckets_this_step())) {
    state_.recut(plan_.hash());
    plan_.forget();
  }
  return plan_.add(std::move(now), bucket.step);
}

// Every rank tells every other what it found wrong since the last time (a
// parameter not lent, a loaded checkpoint that does not fit) and which run
// its loaded shards came from. Any problem on any rank fails the step on
// every rank alike, named by rank, and nothing is stepped; otherwise the
// ranks take one run id.
void ZeroHook::agree_before_stepping(bool is_last) {
  const bool whole_step = plan_.hash() == 0 || state_.pending_load();
  if (whole_step) plan_.fix_hash();
  std::string mine = schedule_.take_problems();
  if (state_.pending_load()) {
    const std::string loaded = state_.loaded_problem(plan_);
    if (!loaded.empty()) mine += (mine.empty() ? "" : "; ") + loaded;
  }
  const StepVerdict verdict = agree_on_step(comm_, state_.run_id(), state_.loaded_run(), mine);
  if (!verdict.why.empty()) {
    // Nothing of the step was stepped: its kept buckets are dropped.
    schedule_.drop_step();
    schedule_.refused(is_last);
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, name_ << ": step " << schedule_.step()
                                           << " refused on every rank before any parameter "
                                              "moved: "
                                           << verdict.why);
  }
  if (whole_step) state_.agree_on_run(verdict.run_id);
}

void ZeroHook::step_and_share(const BucketLayout& l, float* const* params, const float* reduced,
                              size_t base, const Where& at) {
  {
    // A bucket kept for the step's last one is its span in the trace.
    PhaseSpan span(DDPH_PHASE_OPTIMIZER_STEP);
    for (const Piece& p : plan_.pieces(l.index)) {
      if (p.rank != rank_) continue;
      const size_t first = l.offsets[p.param] + p.begin;
      state_.step(l, p, params[p.param] + p.begin, reduced + (first - base), at);
    }
  }
  if (world_ > 1) protocol_->share(l, plan_, params, at);
}

void ZeroHook::step_kept(const Where& at) {
  // agree_before_stepping() found the loaded shard's layout is this one.
  state_.check_shard_fits(plan_.hash());
  schedule_.step_kept(at, [&](const KeptBucket& k) {
    step_and_share(plan_.layout(k.index), k.params.data(), k.grads, k.base, at);
  });
}

void ZeroHook::end_step() {
  state_.end_step();
  schedule_.end_step();
}

void ZeroHook::save_state(ddph_write_fn write, void* sink) {
  const std::string blob = state_.save(plan_.hash());
  write(sink, blob.data(), blob.size());
}

void ZeroHook::load_state(const void* bytes, size_t n) {
  LoadedState loaded = decode_loaded(bytes, n, options_.optim.kind, name_);
  state_.load(loaded, plan_.hash());
}

void ZeroHook::stats(ddph_stats_t* out) const {
  Hook::stats(out);
  protocol_->stats(out);
}

namespace {

template <bool kInterleaved>
const ddph_hook_t& zero_table(const char* summary) {
  static const ddph_hook_t table = [summary] {
    size_t n = 0;
    const ddph_option_spec_t* specs = zero_specs(&n);
    return hook_table<ZeroHookOf<kInterleaved>>(ZeroHookOf<kInterleaved>::kName, summary, specs, n,
                                                /*keeps_state=*/true);
  }();
  return table;
}

}  // namespace

const ddph_hook_t& zero_step_hook() {
  return zero_table<false>(
      "ZeRO: each rank keeps and steps the optimizer state of 1/world of the parameters, at "
      "the step's last bucket, and shares the updated parameters");
}

const ddph_hook_t& zero_step_interleaved_hook() {
  return zero_table<true>(
      "ZeRO: each rank keeps and steps the optimizer state of 1/world of the parameters, "
      "bucket by bucket as each is reduced, and shares the updated parameters");
}

}  // namespace zero
}  // namespace ddph
