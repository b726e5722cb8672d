// PyTorch's post_localSGD_hook: the mean over the world for the first
// start_localsgd_iter steps, then the mean inside this rank's subgroup only
// (by default the ranks of one machine), or no gradient communication at
// all (post_local_gradient_allreduce: false). Model averaging
// (model_averaging_hook.cpp) keeps the subgroups from drifting apart.
//
// On a CUDA bucket the communicator enqueues the allreduce on the bucket's
// stream (comm_nccl); the step counter is host state either way.
#include <memory>
#include <string>

#include "core/base/options.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/group_comm.h"
#include "core/hook/hook.h"
#include "core/hook/rank_groups.h"
#include "core/kernels/on_device.h"
#include "plugins/post_localsgd/hooks.h"
#include "plugins/post_localsgd/step_counter.h"

namespace ddph {
namespace post_localsgd {
namespace {

constexpr const char* kHook = "post_localsgd/post_localsgd";

std::vector<int> subgroup_colors(ddph_comm_t* world, const Options& o) {
  const std::string list = o.get_string("subgroups");
  const int64_t size = o.get_int("subgroup_size");
  const int n = comm_size(world);
  if (!list.empty()) return groups_from_list(list, n, kHook);
  if (size > 0) return groups_of_size(n, int(size), kHook);
  return groups_by_host(all_host_names(world));
}

const ddph_option_spec_t kSpecs[] = {
    spec_int("start_localsgd_iter", "100",
             "steps of global gradient averaging before local SGD starts (PyTorch's "
             "start_localSGD_iter, which has no default; 100 is its documentation's example)",
             0, 9007199254740992.0),
    spec_bool("post_local_gradient_allreduce", "true",
              "after the start, average gradients inside each subgroup (true) or not at all"),
    spec_int("subgroup_size", "0",
             "ranks per subgroup, consecutive ranks together; 0: the ranks of one machine (same "
             "host name)",
             0, 1 << 20),
    spec_string("subgroups", "",
                "explicit subgroups, e.g. '0,1;2,3' (';' between groups); overrides "
                "subgroup_size"),
};

class PostLocalSgdHook : public Hook {
 public:
  static constexpr HookListing kListing{
      "post_localsgd",
      "global mean for start_localsgd_iter steps, then the mean inside subgroups only (PyTorch's "
      "post_localSGD_hook)"};
  static constexpr bool kRunsOnCuda = true;
  static OptionSpecs option_specs() { return kSpecs; }

  explicit PostLocalSgdHook(const ddph_hook_init_t& init) : world_(init.comm) {
    Options o(init.options, init.num_options);
    start_ = uint64_t(o.get_int("start_localsgd_iter"));
    allreduce_after_ = o.get_bool("post_local_gradient_allreduce");
    // Collective: every rank creates this hook with the same options.
    if (allreduce_after_)
      group_ = std::make_unique<GroupComm>(world_, subgroup_colors(world_, o), kHook);
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    require_cuda_build(where_of(bucket), kHook);
    const int64_t n = bucket.buffer.shape[0];
    const uint64_t bytes = uint64_t(n) * dtype_size(dtype);
    count_in(bytes);
    ddph_comm_t* comm = counter_.step() < start_ ? world_
                        : allreduce_after_       ? group_->get()
                                                 : nullptr;
    if (comm != nullptr) {
      FlatTensor buf(data_ptr(bucket.buffer), dtype, n, bucket.buffer.device);
      count_out(bytes);
      comm_allreduce(comm, buf, DDPH_AVG, bucket.stream);
    }
    counter_.advance(bucket);
    done.ok();
  }

  void save_state(ddph_write_fn write, void* sink) override { counter_.save(write, sink); }
  void load_state(const void* bytes, size_t n) override { counter_.load(bytes, n); }

 private:
  ddph_comm_t* world_;
  uint64_t start_ = 0;
  bool allreduce_after_ = true;
  std::unique_ptr<GroupComm> group_;
  StepCounter counter_{kHook};
};

}  // namespace

const ddph_hook_t& post_localsgd_hook() {
  return hook_table<PostLocalSgdHook>();
}

}  // namespace post_localsgd
}  // namespace ddph
