// The zero hooks against PyTorch DDP with a plain (unsharded) torch.optim
// optimizer: 2 and 3 ranks over Gloo run 20 steps of zero_step and
// zero_step_interleaved, with protocol allreduce (round-robin buckets and
// shard_buckets) and reduce_scatter, for SGD with momentum, Adam and AdamW.
// Final parameters must agree with torch within 1e-6 (relative for large
// values) and be bit-identical across the ranks. PyTorch's own ZeRO hook
// runs on NCCL only; here Gloo carries it.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace {

using namespace ddph_test::optim;

constexpr int kSteps = 20;

using Optimizer = OptimizerCase;

const Optimizer kOptimizers[] = {
    {"sgd_momentum", "optimizer: sgd, lr: 0.05, momentum: 0.9, dampening: 0.1, weight_decay: 0.01",
     "torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01, "
     "foreach=False)"},
    {"adam", "optimizer: adam, lr: 0.01, weight_decay: 0.01, amsgrad: true",
     "torch.optim.Adam(ps, lr=0.01, weight_decay=0.01, amsgrad=True, foreach=False)"},
    {"adamw", "optimizer: adamw, lr: 0.01, weight_decay: 0.05",
     "torch.optim.AdamW(ps, lr=0.01, weight_decay=0.05, foreach=False)"},
};

struct Variant {
  const char* name;
  const char* hook;     // family/name
  const char* options;  // appended to the optimizer's
};

const Variant kVariants[] = {
    {"step_allreduce", "zero/zero_step", "protocol: allreduce"},
    {"interleaved_allreduce", "zero/zero_step_interleaved", "protocol: allreduce"},
    {"step_shard_buckets", "zero/zero_step", "protocol: allreduce, shard_buckets: true"},
    {"interleaved_shard_buckets", "zero/zero_step_interleaved",
     "protocol: allreduce, shard_buckets: true"},
    {"step_reduce_scatter", "zero/zero_step", "protocol: reduce_scatter"},
    {"interleaved_reduce_scatter", "zero/zero_step_interleaved", "protocol: reduce_scatter"},
};

struct Case {
  Optimizer optimizer;
  Variant variant;
  int world;
  bool with_ids;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.optimizer.name << " " << c.variant.name << " world " << c.world;
}

std::string key(const Optimizer& o, int world) {
  return std::string(o.name) + "_" + std::to_string(world);
}

// torch's final parameters of every optimizer at worlds 2 and 3, from one
// torch run.
const std::map<std::string, std::vector<float>>& torch_results() {
  static const std::map<std::string, std::vector<float>> results = [] {
    std::map<std::string, std::vector<float>> out;
    for (int world : {2, 3}) {
      std::vector<std::pair<std::string, std::string>> makers;
      for (const Optimizer& o : kOptimizers) makers.push_back({key(o, world), o.torch});
      for (auto& kv : torch_optim_reference(std::vector<int>(kSteps, world), makers))
        out.insert(kv);
    }
    return out;
  }();
  return results;
}

class ZeroTorchParity : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroTorchParity, TwentyStepsMatchDdpWithThePlainOptimizer) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const Case c = GetParam();
  const std::vector<float> want = torch_results().at(key(c.optimizer, c.world));
  ASSERT_EQ(want.size(), total_numel());
  const std::string config = yaml(std::string(c.optimizer.options) + ", " + c.variant.options,
                                  "{family: default, name: allreduce}", c.variant.hook);
  auto results = ddph_test::run_ranks(c.world, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    m.with_ids = c.with_ids;
    for (int step = 0; step < kSteps; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    const std::vector<float> got = m.flat();
    const WorstElement w =
        worst_element(got, want, [](double x) { return 1e-6 * std::max(1.0, std::fabs(x)); });
    DDPH_CHILD_CHECK(w.ratio <= 1, "element %zu is %.9g, torch %.9g (%.2f x tolerance)", w.at,
                     got[w.at], want[w.at], w.ratio);
    size_t changed = 0;
    Model fresh;
    const std::vector<float> start = fresh.flat();
    for (size_t i = 0; i < got.size(); ++i) changed += got[i] != start[i];
    DDPH_CHILD_CHECK(changed == got.size(), "only %zu of %zu parameters moved", changed,
                     got.size());
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, got.data(), got.size() * 4),
                     "parameters differ across ranks");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// DDP rebuilds its buckets after the first step; here the host regroups
// its parameters between steps 6 and 7. The shards are re-cut, the state
// follows each parameter (by id), and the run still ends as torch's.
class ZeroRegroup : public ::testing::TestWithParam<Variant> {};

TEST_P(ZeroRegroup, RegroupedBucketsBetweenStepsKeepTheOptimizerState) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const Variant v = GetParam();
  const Optimizer& adam = kOptimizers[1];
  const std::vector<float> want = torch_results().at(key(adam, 3));
  const std::string config = yaml(std::string(adam.options) + ", " + v.options,
                                  "{family: default, name: allreduce}", v.hook);
  auto results = ddph_test::run_ranks(3, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    m.with_ids = true;
    for (int step = 0; step < kSteps; ++step) {
      if (step == 7) m.regroup({{3, 0}, {2, 1}});
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    }
    const std::vector<float> got = m.flat();
    for (size_t i = 0; i < got.size(); ++i)
      DDPH_CHILD_CHECK(
          std::fabs(double(got[i]) - want[i]) <= 1e-6 * std::max(1.0, std::fabs(double(want[i]))),
          "element %zu is %.9g, torch %.9g", i, got[i], want[i]);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroRegroup, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& i) {
                           return std::string(i.param.name);
                         });

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (const Optimizer& o : kOptimizers)
    for (const Variant& v : kVariants)
      for (int world : {2, 3}) out.push_back({o, v, world, world == 3});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroTorchParity, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.optimizer.name) + "_" + i.param.variant.name +
                                  "_world" + std::to_string(i.param.world);
                         });

}  // namespace
