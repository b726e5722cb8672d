// PyTorch's _hook_then_optimizer: run the wrapped hook on the bucket, then,
// once its reduced gradient is in the bucket, step a functional optimizer on
// each parameter of the bucket in place. The step of an early bucket thus
// runs while the host still computes the backward of later layers, instead
// of in one optimizer pass after the whole backward.
//
// Host and CUDA buckets run the same code: the same parameter checks, the
// same plan per parameter (plan_step), the same upcast (on_device.h); only
// the loop runs as a CUDA kernel on the bucket's stream, with the state in
// device memory (device_slots.h). Nothing waits for the GPU inside run().
//
// On a host bucket the step runs on a thread of the hook's own, after run()
// has returned (DDPH_HOOK_PIPELINED, ABI 1.6): the host starts the next
// bucket's communication while this one steps, as PyTorch's hook lets the
// next bucket's allreduce run while its future's callback steps. A CUDA
// bucket gets the same overlap from its stream, so it steps (enqueues) and
// calls done inside run(), as before.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/base/phase_span.h"
#include "core/base/tensor.h"
#include "core/hook/hook_plugin.h"
#include "core/hook/param_view.h"
#include "core/kernels/on_device.h"
#include "core/optim/device_states.h"
#include "core/optim/state_blob.h"
#include "plugins/optimizer_overlap/options.h"
#include "plugins/optimizer_overlap/param_select.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

class HookThenOptimizer : public Hook {
 public:
  static constexpr const char* kName = "hook_then_optimizer";
  static constexpr HookListing kListing{
      kName,
      "runs the wrapped hook, then steps sgd/adam/adamw on the bucket's parameters in place"};
  static constexpr uint32_t kFlags = DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS |
                                     DDPH_HOOK_STEPS_OPTIMIZER | DDPH_HOOK_PIPELINED;
  static constexpr bool kRunsOnCuda = true;
  static OptionSpecs option_specs() { return hook_specs(); }
  static void check_options(OptionCheck& c) { optimizer_overlap::check_options(c); }

  explicit HookThenOptimizer(const ddph_hook_init_t& init)
      : inner_(*init.inner),
        options_(parse_options(init)),
        selection_(options_.params, group_indices(options_.groups)) {
    // Refused here rather than at the first bucket: the optimizer would
    // otherwise step on whatever the bucket holds, and train on it quietly.
    DDPH_CHECK(!(inner_.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE), DDPH_UNSUPPORTED,
               kName << ": the wrapped hook '" << (inner_.hook->name ? inner_.hook->name : "?")
                     << "' does not leave the reduced gradient in the bucket buffer "
                        "(DDPH_HOOK_RESULT_ELSEWHERE), so there is no gradient to step the "
                        "optimizer with; wrap a hook whose result lands in the bucket, e.g. "
                        "default/allreduce");
  }

  // Steps what is queued (and calls its dones), then joins: a host may
  // destroy the hook without waiting for the dones itself.
  ~HookThenOptimizer() override {
    {
      std::lock_guard<std::mutex> lock(step_mu_);
      stopping_ = true;
    }
    step_wake_.notify_all();
    if (step_thread_.joinable()) step_thread_.join();
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    DDPH_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, DDPH_UNSUPPORTED,
               kName << ": bucket dtype " << dtype_name(dtype)
                     << " is not supported (float32, float16, bfloat16 gradients)");
    require_cuda_build(where_of(bucket), kName);
    // Everything the step needs is checked before any byte is sent, so a
    // bad bucket is refused on every rank alike instead of failing midway.
    selection_.select(bucket, &selected_, &group_);
    check_ids(bucket);
    params_.assign(bucket.num_params, nullptr);
    size_t largest = 0;
    for (size_t i = 0; i < bucket.num_params; ++i) {
      if (!selected_[i]) continue;
      params_[i] = param_f32_data(bucket, i, kName, "the parameter (its own tensor)",
                                  BucketMemory::kHostOrCuda);
      largest = std::max(largest, size_t(view_numel(bucket.params[i])));
    }
    count_in(uint64_t(bucket.buffer.shape[0]) * dtype_size(dtype));

    const Where at = where_of(bucket);
    // The step thread's buckets touch states_ too, and their dones come first.
    if (at.cuda()) drain();
    run_inner_for_step(inner_, bucket, kName);
    if (!at.cuda()) return queue_host_step(bucket, dtype, done);

    // The upcast lease's free is enqueued before done: a host may let the
    // stream go once the bucket is done.
    {
      // A low-precision bucket steps fp32 parameters: each gradient is upcast
      // into one scratch buffer, reused parameter after parameter (on a GPU in
      // stream order).
      ScratchBuffers::Lease upcast =
          scratch_.get(at, bucket.index, dtype == DType::F32 ? 0 : largest * sizeof(float));
      PhaseSpan span(DDPH_PHASE_OPTIMIZER_STEP);  // enqueued on the bucket's stream
      for (const StepParam& p : step_params(bucket, dtype)) {
        const float* grad = static_cast<const float*>(p.grad);
        if (dtype != DType::F32) {
          cast_into(at, dtype, p.grad, DType::F32, upcast.data(), p.numel);
          grad = static_cast<const float*>(upcast.data());
        }
        device_.step(p.key, states_[p.key], *p.config, at, p.data, grad, p.numel);
      }
    }
    done.ok();
  }

  // The CPU path's bytes whatever memory the state is in: device slots are
  // copied into a host snapshot first.
  void save_state(ddph_write_fn write, void* sink) override {
    drain();
    std::string blob;
    if (device_.empty()) {
      blob = optim::encode_state(states_, options_.optim.kind);
    } else {
      optim::StateMap snapshot = states_;
      device_.download_into(&snapshot);
      blob = optim::encode_state(snapshot, options_.optim.kind);
    }
    write(sink, blob.data(), blob.size());
  }

  // Loaded state lands on the host; a CUDA bucket uploads it at its next step.
  void load_state(const void* bytes, size_t n) override {
    optim::StateMap loaded =
        optim::decode_state(bytes, n, options_.optim.kind);  // decoded whole, then swapped in
    drain();
    device_.clear();
    states_ = std::move(loaded);
  }

  void stats(ddph_stats_t* out) const override {
    Hook::stats(out);
    take_inner_bytes_out(inner_, out);
  }

 private:
  // Each parameter id once per step: two parameters under one id would
  // share one optimizer state (and one of another size would fail as if a
  // checkpoint did not fit). Checked before the bucket is reduced; a repeat
  // in a later bucket of the step is found there, after the earlier
  // bucket's step.
  void check_ids(const ddph_bucket_t& bucket) {
    const int64_t* ids = param_ids(bucket);
    if (ids == nullptr) return;
    // A step ends at its last bucket, or where the host's step count moves
    // (a step abandoned before its last bucket).
    if (bucket.step != id_step_) {
      id_step_ = bucket.step;
      ++id_epoch_;
    }
    sorted_ids_.assign(ids, ids + bucket.num_params);
    std::sort(sorted_ids_.begin(), sorted_ids_.end());
    const auto twice = std::adjacent_find(sorted_ids_.begin(), sorted_ids_.end());
    if (twice != sorted_ids_.end()) {
      const int64_t id = *twice;
      const size_t first = size_t(std::find(ids, ids + bucket.num_params, id) - ids);
      const size_t second = size_t(std::find(ids + first + 1, ids + bucket.num_params, id) - ids);
      DDPH_FAIL(DDPH_INVALID_ARGUMENT,
                kName << ": bucket " << bucket.index << " holds parameter id " << id
                      << " twice (params[" << first << "] and params[" << second
                      << "]); each parameter needs an id of its own (ddph_bucket_t.param_ids), "
                         "or two parameters would share one optimizer state");
    }
    for (size_t i = 0; i < bucket.num_params; ++i) {
      auto seen = id_seen_.find(ids[i]);
      DDPH_CHECK(seen == id_seen_.end() || seen->second.epoch != id_epoch_ ||
                     seen->second.bucket == bucket.index,
                 DDPH_INVALID_ARGUMENT,
                 kName << ": parameter id " << ids[i] << " is in bucket " << seen->second.bucket
                       << " and in bucket " << bucket.index << " of step " << bucket.step
                       << "; each parameter needs an id of its own (ddph_bucket_t.param_ids), or "
                          "two parameters would share one optimizer state");
    }
    for (size_t i = 0; i < bucket.num_params; ++i)
      id_seen_[ids[i]] = IdSeen{id_epoch_, bucket.index};
    if (bucket.is_last) ++id_epoch_;
  }

  static std::vector<std::vector<size_t>> group_indices(const std::vector<ParamGroup>& groups) {
    std::vector<std::vector<size_t>> out;
    for (const ParamGroup& g : groups) out.push_back(g.indices);
    return out;
  }

  // One selected parameter of a bucket, as a step needs it: its lent
  // values, its gradient in the bucket (of the bucket's dtype), its state's
  // key and its group's optimizer.
  struct StepParam {
    float* data;
    const void* grad;
    size_t numel;
    optim::ParamKey key;
    const optim::OptimConfig* config;  // in options_, which never change
  };

  // The selected parameters of the bucket run() checked (params_ holds
  // their lent values).
  std::vector<StepParam> step_params(const ddph_bucket_t& bucket, DType dtype) const {
    std::vector<StepParam> out;
    const char* grads = static_cast<const char*>(data_ptr(bucket.buffer));
    const int64_t* ids = param_ids(bucket);
    for (size_t i = 0; i < bucket.num_params; ++i) {
      if (!selected_[i]) continue;
      const ddph_param_t& p = bucket.params[i];
      out.push_back(
          StepParam{params_[i], grads + size_t(p.offset) * dtype_size(dtype), size_t(view_numel(p)),
                    ids != nullptr ? optim::ParamKey::id(ids[i])
                                   : optim::ParamKey::position(bucket.index, uint32_t(i)),
                    group_[i] == 0 ? &options_.optim : &options_.groups[group_[i] - 1].optim});
    }
    return out;
  }

  // One host bucket's parameter steps, as the step thread needs them: the
  // bucket struct is borrowed only until run() returns, the memory it points
  // to (gradients, parameters) until done. `bucket` names the bucket to
  // the loader's trace (ddph_host_t.span), which never reads it.
  struct HostStep {
    std::vector<StepParam> params;
    DType dtype;
    Completion done;
    const ddph_bucket_t* bucket;
  };

  void queue_host_step(const ddph_bucket_t& bucket, DType dtype, const Completion& done) {
    HostStep job{step_params(bucket, dtype), dtype, done, &bucket};
    {
      std::lock_guard<std::mutex> lock(step_mu_);
      step_queue_.push_back(std::move(job));
    }
    // Started with the first host bucket: a CUDA-only hook needs none.
    if (!step_thread_.joinable()) step_thread_ = std::thread([this] { step_loop(); });
    step_wake_.notify_one();
  }

  // The step thread: buckets in the order they were queued, each done
  // called with no lock held (the host's done may take its time).
  void step_loop() {
    std::unique_lock<std::mutex> lock(step_mu_);
    while (true) {
      step_wake_.wait(lock, [&] { return stopping_ || !step_queue_.empty(); });
      if (step_queue_.empty()) break;  // stopping, and everything has stepped
      HostStep job = std::move(step_queue_.front());
      step_queue_.pop_front();
      stepping_ = true;
      lock.unlock();
      job.done.finish(guard([&] { step_host(job); }));
      lock.lock();
      stepping_ = false;
      if (step_queue_.empty()) step_idle_.notify_all();
    }
  }

  void step_host(const HostStep& job) {
    const Where host{{kDLCPU, 0}, nullptr};
    // On this thread the loader knows the bucket by its pointer only.
    PhaseSpan span(DDPH_PHASE_OPTIMIZER_STEP, job.bucket);
    for (const StepParam& p : job.params) {
      const float* grad = static_cast<const float*>(p.grad);
      if (job.dtype != DType::F32) {
        if (upcast_.size() < p.numel) upcast_.resize(p.numel);
        cast_into(host, job.dtype, p.grad, DType::F32, upcast_.data(), p.numel);
        grad = upcast_.data();
      }
      device_.step(p.key, states_[p.key], *p.config, host, p.data, grad, p.numel);
    }
  }

  // Waits until every queued host bucket has stepped and its done returned,
  // so that the caller may touch states_ and device_.
  void drain() {
    std::unique_lock<std::mutex> lock(step_mu_);
    step_idle_.wait(lock, [&] { return step_queue_.empty() && !stepping_; });
  }

  ddph_hook_ref_t inner_;
  HookOptions options_;
  ParamSelection selection_;
  // Every parameter's step count and, for host buckets, its buffers; the
  // buffers of parameters stepped on a GPU live in device_ instead.
  optim::StateMap states_;
  optim::DeviceStates<optim::ParamKey> device_{kName};
  // Where each parameter id was last seen (check_ids).
  struct IdSeen {
    uint64_t epoch;   // its step, as id_epoch_ counts them
    uint64_t bucket;  // its bucket index
  };
  std::map<int64_t, IdSeen> id_seen_;
  uint64_t id_epoch_ = 1, id_step_ = 0;
  std::vector<int64_t> sorted_ids_;
  // Per-bucket scratch, kept to allocate nothing in steady state.
  std::vector<char> selected_;
  std::vector<uint32_t> group_;  // per parameter: its group + 1, or 0
  std::vector<float*> params_;
  ScratchBuffers scratch_;
  // The step thread's: its queue, and the upcast of a low-precision host
  // bucket (used by that thread only). states_ and device_ are the step
  // thread's while host buckets are queued; run() on a CUDA bucket,
  // save_state and load_state drain() first.
  std::vector<float> upcast_;
  std::mutex step_mu_;
  std::condition_variable step_wake_, step_idle_;
  std::deque<HostStep> step_queue_;
  bool stepping_ = false;
  bool stopping_ = false;
  std::thread step_thread_;  // joined by the destructor
};

}  // namespace

}  // namespace optimizer_overlap
}  // namespace ddph

DDPH_DEFINE_HOOK_PLUGIN("optimizer_overlap", "0.1.0",
                        &ddph::hook_table<ddph::optimizer_overlap::HookThenOptimizer>())
