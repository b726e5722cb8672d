// Model averaging, the companion of local SGD: a wrapper that runs its inner
// hook, then, on the steps PyTorch's averagers pick, averages the bucket's
// parameters (which the host lends through params[].data).
//
// Periodic (PyTorch's PeriodicModelAverager): at steps s >= warmup_steps
// with (s - warmup_steps) % period == 0, over the whole world.
// Hierarchical (HierarchicalModelAverager, option hierarchy
// "P1:G1,P2:G2,..."): at steps s >= warmup_steps, the largest period Pk that
// divides s picks groups of Gk consecutive ranks; the last Gk must be the
// world size.
//
// Wrapping hook_then_optimizer reproduces PyTorch's order exactly (reduce,
// optimizer step, average); with the host's own optimizer the average comes
// first, right before that step's update.
//
// On a CUDA bucket the parameters are device memory on the bucket's GPU;
// the inner hook, the copies and the allreduce are all enqueued on the
// bucket's stream (param_average.h).
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/options.h"
#include "core/comm/comm_call.h"
#include "core/hook/group_comm.h"
#include "core/hook/hook.h"
#include "core/hook/rank_groups.h"
#include "core/kernels/on_device.h"
#include "plugins/post_localsgd/hooks.h"
#include "plugins/post_localsgd/param_average.h"
#include "plugins/post_localsgd/step_counter.h"

namespace ddph {
namespace post_localsgd {
namespace {

constexpr const char* kHook = "post_localsgd/model_averaging";

struct Level {
  uint64_t period;
  std::unique_ptr<GroupComm> group;
};

// "2:2,4:4" -> {(2, 2), (4, 4)}, checked as PyTorch checks it, except for
// the world size (check_world below), which only create() knows.
std::vector<std::pair<int64_t, int64_t>> parse_hierarchy(const std::string& text) {
  std::vector<std::pair<int64_t, int64_t>> levels;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    long long period = 0, size = 0;
    char colon = 0, extra = 0;
    std::stringstream one(item);
    DDPH_CHECK((one >> period >> colon >> size) && colon == ':' && !(one >> extra),
               DDPH_INVALID_ARGUMENT,
               kHook << ": hierarchy '" << text << "': '" << item << "' is not PERIOD:GROUP_SIZE");
    DDPH_CHECK(period >= 1 && size >= 1, DDPH_INVALID_ARGUMENT,
               kHook << ": hierarchy '" << text << "': periods and group sizes must be >= 1");
    DDPH_CHECK(levels.empty() || period > levels.back().first, DDPH_INVALID_ARGUMENT,
               kHook << ": hierarchy '" << text << "': periods must increase");
    levels.emplace_back(period, size);
  }
  DDPH_CHECK(!levels.empty(), DDPH_INVALID_ARGUMENT, kHook << ": hierarchy is empty");
  return levels;
}

void check_world(const std::vector<std::pair<int64_t, int64_t>>& levels, const std::string& text,
                 int world) {
  DDPH_CHECK(levels.back().second == world, DDPH_INVALID_ARGUMENT,
             kHook << ": hierarchy '" << text << "': the last group size, " << levels.back().second
                   << ", must be the world size " << world
                   << " (the largest period averages everyone)");
}

const ddph_option_spec_t kSpecs[] = {
    spec_int("period", "4", "average the parameters every this many steps (periodic mode)", 1,
             9007199254740992.0),
    spec_int("warmup_steps", "0", "no averaging before this step", 0, 9007199254740992.0),
    spec_string("hierarchy", "",
                "hierarchical mode, PERIOD:GROUP_SIZE pairs by increasing period, e.g. "
                "'2:2,4:4'; the last group size is the world size; replaces period"),
};

class ModelAveragingHook : public Hook {
 public:
  static constexpr HookListing kListing{
      "model_averaging",
      "runs the wrapped hook, then periodically averages the bucket's parameters over the world "
      "or hierarchical groups (PyTorch's Periodic/HierarchicalModelAverager)"};
  static constexpr uint32_t kFlags = DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS;
  static constexpr bool kRunsOnCuda = true;
  static OptionSpecs option_specs() { return kSpecs; }
  // What needs no communicator: the hierarchy's shape.
  static void check_options(OptionCheck& c) {
    const std::string hierarchy = c.options.get_string("hierarchy");
    if (hierarchy.empty()) return;
    c.bad_option = "hierarchy";
    parse_hierarchy(hierarchy);
    c.bad_option = nullptr;
  }

  explicit ModelAveragingHook(const ddph_hook_init_t& init)
      : world_(init.comm), inner_(*init.inner) {
    DDPH_CHECK(!(inner_.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE), DDPH_UNSUPPORTED,
               kHook << ": the inner hook '" << (inner_.hook->name ? inner_.hook->name : "?")
                     << "' uses params[].data for its result, where this hook needs the "
                        "parameters");
    Options o(init.options, init.num_options);
    warmup_ = uint64_t(o.get_int("warmup_steps"));
    const std::string hierarchy = o.get_string("hierarchy");
    if (hierarchy.empty()) {
      periodic_ = uint64_t(o.get_int("period"));
      return;
    }
    const int world = comm_size(world_);
    const auto hierarchy_levels = parse_hierarchy(hierarchy);
    check_world(hierarchy_levels, hierarchy, world);
    for (const auto& l : hierarchy_levels)  // collective: splits
      levels_.push_back(Level{
          uint64_t(l.first),
          std::make_unique<GroupComm>(world_, groups_of_size(world, int(l.second), kHook), kHook)});
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    require_cuda_build(where_of(bucket), kHook);
    count_in(uint64_t(bucket.buffer.shape[0]) * dtype_size(dtype));
    run_hook_blocking(inner_, bucket);
    if (ddph_comm_t* group = group_now()) count_out(average_params(group, bucket, scratch_, kHook));
    counter_.advance(bucket);
    done.ok();
  }

  void save_state(ddph_write_fn write, void* sink) override { counter_.save(write, sink); }
  void load_state(const void* bytes, size_t n) override { counter_.load(bytes, n); }

  // Bytes out: the inner hook's plus the averages'.
  void stats(ddph_stats_t* out) const override {
    Hook::stats(out);
    const uint64_t averages = out->bytes_out;
    out->bytes_out = 0;
    take_inner_bytes_out(inner_, out);  // left at 0 when the inner counts nothing
    out->bytes_out += averages;
  }

 private:
  // The group that averages at this step, or NULL.
  ddph_comm_t* group_now() const {
    const uint64_t s = counter_.step();
    if (s < warmup_) return nullptr;
    if (levels_.empty()) return (s - warmup_) % periodic_ == 0 ? world_ : nullptr;
    for (auto l = levels_.rbegin(); l != levels_.rend(); ++l)
      if (s % l->period == 0) return l->group->get();
    return nullptr;
  }

  ddph_comm_t* world_;
  ddph_hook_ref_t inner_;
  uint64_t warmup_ = 0, periodic_ = 1;
  std::vector<Level> levels_;
  StepCounter counter_{kHook};
  ScratchBuffers scratch_;
};

}  // namespace

const ddph_hook_t& model_averaging_hook() {
  return hook_table<ModelAveragingHook>();
}

}  // namespace post_localsgd
}  // namespace ddph
