// `hook: {family: auto}` in the session (docs/auto.md): one chain per
// candidate, the ranks' exchange of what they measured at the step
// boundaries the chooser asks for, and the error-feedback residual of the
// candidate a bucket leaves flushed into the one it goes to.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "loader/session/session.h"

namespace ddph {
namespace loader {
namespace {

// The bucket's squared L2 norm on this rank, for Accordion's test: fp32
// buffers in host memory only (0 for others, which never trip it).
double squared_norm(const ddph_bucket_t& bucket) {
  const DLTensor& t = bucket.buffer;
  if (t.device.device_type != kDLCPU || t.dtype.code != kDLFloat || t.dtype.bits != 32 ||
      t.dtype.lanes != 1)
    return 0;
  const float* p = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  int64_t n = 1;
  for (int32_t d = 0; d < t.ndim; ++d) n *= t.shape[d];
  // Four sums apart, so that the adds do not wait for each other: the
  // pass runs on the worker before the bucket, every recheck_steps steps.
  double sum[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) sum[k] += double(p[i + k]) * double(p[i + k]);
  for (; i < n; ++i) sum[0] += double(p[i]) * double(p[i]);
  const double total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  return std::isfinite(total) ? total : 0;
}

}  // namespace

void Session::create_auto(ddph_comm_t* hooks_comm) {
  const ResolvedAuto& a = *job_.auto_choice;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    try {
      chains_.create(*a.candidates[i], false, 0, hooks_comm, device_allocator_);
    } catch (const Error& e) {
      const CandidateSpec& c = a.specs[i];
      DDPH_FAIL(e.code(), "auto candidate '" << c.info.name << "' (" << c.hook.family << "/"
                                             << c.hook.name << ") failed to open: " << e.what());
    }
  }
  chooser_ = std::make_unique<Chooser>(a.settings, a.infos(), placement_.world_size);
  // Its exchanges come at step boundaries, on the worker. control_ serves
  // when only the worker uses it; else a communicator of its own, so that
  // an exchange can only ever pair with another rank's exchange.
  ddph_comm_t* own = split_of_comm();
  owns_auto_comm_ = own != nullptr;
  auto_comm_ = own != nullptr ? own : control_;
  // Gloo and MPI stage a GPU bucket through the host and wait, so its
  // time is the transfer's. Another backend (NCCL) completes a hook once
  // its work is enqueued on the stream: the chooser would compare times
  // to enqueue, and it cannot wait for a stream itself.
  const std::string& backend = job_.config.comm.backend;
  auto_gpu_warning_due_ = backend != "gloo" && backend != "mpi";
}

const HookChain& Session::auto_chain(PendingBucket& pending) {
  if (pending.metrics_step != auto_step_) {
    // Every bucket of the step before has been submitted: how long its
    // backward ran on after each, the time that can hide a reduction, and
    // its period, from its first submission to this step's.
    auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    std::optional<Clock::time_point> first, end;
    for (const auto& t : auto_submitted_)
      if (t) {
        if (!first || *t < *first) first = t;
        if (!end || *t > *end) end = t;
      }
    std::vector<double> ahead;
    for (const auto& t : auto_submitted_) ahead.push_back(t ? seconds(*end - *t) : -1.0);
    chooser_->finished_step(ahead, first ? seconds(pending.submitted - *first) : -1.0);
    auto_submitted_.clear();
    auto_step_ = pending.metrics_step;
    if (chooser_->begin_step()) {
      in_flight_.wait();  // every bucket before this step has been measured
      std::vector<double> report = chooser_->report();
      if (comm_size(auto_comm_) > 1) {
        FlatTensor t(report.data(), DType::F64, int64_t(report.size()));
        comm_allreduce(auto_comm_, t, DDPH_MAX, nullptr);
      }
      chooser_->agreed(report);
      log(chooser_->decision_changed() ? DDPH_LOG_INFO : DDPH_LOG_DEBUG, "auto",
          chooser_->last_decision());
    }
  }
  if (auto_gpu_warning_due_ && pending.bucket.buffer.device.device_type != kDLCPU) {
    auto_gpu_warning_due_ = false;
    log(DDPH_LOG_WARN, "auto",
        "auto: bucket " + std::to_string(pending.bucket.index) +
            " is in GPU memory and comm backend '" + job_.config.comm.backend +
            "' may complete a bucket once its work is enqueued, so the times auto compares "
            "need not be the transfers' (docs/auto.md#limits); a fixed hook is the safer "
            "choice for GPU buckets on this backend");
  }
  if (auto_submitted_.size() <= pending.metrics_bucket)
    auto_submitted_.resize(size_t(pending.metrics_bucket) + 1);
  auto_submitted_[pending.metrics_bucket] = pending.submitted;
  const Pick pick = chooser_->pick(pending.metrics_bucket, pending.bytes);
  pending.auto_pick = pick;
  if (chooser_->wants_norm()) chooser_->add_norm_sq(squared_norm(pending.bucket));
  const size_t first = job_.rules.size();
  const int64_t index = pending.bucket.index;
  // What the candidate it leaves still owes this bucket (its error
  // feedback) joins the gradients the next one reduces. A bucket of
  // another size under the same index (DDP rebuilds its buckets after the
  // first step) is another bucket: its old residual is no part of it, and
  // the hook that kept one drops it when it next runs that index. A bucket
  // index not run since open or a checkpoint's load is not flushed: a
  // residual loaded with the hooks stays with its candidate.
  auto last = auto_last_.find(index);
  if (last != auto_last_.end() && last->second.candidate != pick.candidate &&
      last->second.bytes == pending.bytes) {
    in_flight_.wait();
    DDPH_CALL(take_residuals(chains_.all()[first + size_t(last->second.candidate)].elements,
                             pending.bucket));
  }
  auto_last_[index] = AutoLast{pick.candidate, pending.bytes};
  return chains_.all()[first + size_t(pick.candidate)];
}

void Session::save_chooser(std::vector<StateRecord>& records) const {
  if (chooser_ != nullptr) records.push_back(StateRecord{kAutoFamily, kAutoHook, chooser_->save()});
}

std::unique_ptr<Chooser> Session::read_chooser(std::vector<StateRecord>& records) const {
  if (chooser_ == nullptr) return nullptr;
  const bool last_is_chooser =
      !records.empty() && records.back().family == kAutoFamily && records.back().hook == kAutoHook;
  DDPH_CHECK(last_is_chooser, DDPH_INVALID_ARGUMENT,
             "state blob has no auto chooser record (it was saved by a job without "
             "hook: {family: auto})");
  const StateRecord mine = records.back();
  records.pop_back();
  auto chooser = std::make_unique<Chooser>(job_.auto_choice->settings, job_.auto_choice->infos(),
                                           placement_.world_size);
  if (!chooser->load(mine.blob.data(), mine.blob.size())) {
    // Its timings were of another world size: they say nothing here.
    chooser = std::make_unique<Chooser>(job_.auto_choice->settings, job_.auto_choice->infos(),
                                        placement_.world_size);
    log(DDPH_LOG_WARN, "auto",
        "auto: the checkpoint's chooser state is from another world size; the chooser starts "
        "fresh (warm-up, then exploring)");
  }
  return chooser;
}

}  // namespace loader
}  // namespace ddph
