// hook_then_optimizer against torch.optim: two ranks over Gloo run 20 steps
// of the hook (wrapping default/allreduce) on the same gradients that a
// PyTorch script averages and hands to torch.optim.SGD / Adam / AdamW
// (Debian's /usr/bin/python3, single-tensor path), with and without
// parameter groups. Final parameters must agree to float32 tolerance and be
// bit-identical across the ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace {

using namespace ddph_test::optim;

constexpr int kWorld = 2;
constexpr int kSteps = 20;

using Case = OptimizerCase;

const Case kCases[] = {
    {"sgd", "optimizer: sgd, lr: 0.1", "torch.optim.SGD(ps, lr=0.1, foreach=False)"},
    {"sgd_momentum", "optimizer: sgd, lr: 0.05, momentum: 0.9, dampening: 0.1, weight_decay: 0.01",
     "torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01, "
     "foreach=False)"},
    {"sgd_nesterov_maximize",
     "optimizer: sgd, lr: 0.05, momentum: 0.8, nesterov: true, weight_decay: 0.001, maximize: "
     "true",
     "torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.001, "
     "maximize=True, foreach=False)"},
    {"adam", "optimizer: adam, lr: 0.01", "torch.optim.Adam(ps, lr=0.01, foreach=False)"},
    {"adam_amsgrad",
     "optimizer: adam, lr: 0.01, beta1: 0.8, beta2: 0.99, eps: 1e-6, weight_decay: 0.01, amsgrad: "
     "true, maximize: true",
     "torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01, "
     "amsgrad=True, maximize=True, foreach=False)"},
    {"adamw", "optimizer: adamw, lr: 0.01, weight_decay: 0.05",
     "torch.optim.AdamW(ps, lr=0.01, weight_decay=0.05, foreach=False)"},
    {"adamw_amsgrad", "optimizer: adamw, lr: 0.005, amsgrad: true, weight_decay: 0.1, eps: 1e-3",
     "torch.optim.AdamW(ps, lr=0.005, amsgrad=True, weight_decay=0.1, eps=1e-3, foreach=False)"},
    // Only parameters 0 and 3 (bucket 0's first, bucket 1's second) move.
    {"adam_params_subset", "optimizer: adam, lr: 0.02, params: \"0,3\"",
     "torch.optim.Adam([ps[0], ps[3]], lr=0.02, foreach=False)"},
    // Parameter groups: torch.optim's own groups, the ungrouped parameters
    // in a group of the defaults. Groups spanning both buckets, a group of
    // one parameter, overrides of every kind (numbers, flags, betas).
    {"adamw_groups",
     "optimizer: adamw, lr: 0.01, weight_decay: 0.05, param_groups: \"1,3: weight_decay=0; 2: "
     "lr=0.003, beta1=0.8, eps=1e-6, amsgrad=true\"",
     "torch.optim.AdamW([{'params': [ps[1], ps[3]], 'weight_decay': 0}, {'params': [ps[2]], "
     "'lr': 0.003, 'betas': (0.8, 0.999), 'eps': 1e-6, 'amsgrad': True}, {'params': [ps[0]]}], "
     "lr=0.01, weight_decay=0.05, foreach=False)"},
    {"sgd_groups",
     "optimizer: sgd, lr: 0.05, momentum: 0.9, param_groups: \"0: momentum=0, lr=0.1; 2-3: "
     "nesterov=true, weight_decay=0.01, maximize=true; 1: dampening=0.3\"",
     "torch.optim.SGD([{'params': [ps[0]], 'momentum': 0, 'lr': 0.1}, {'params': [ps[2], ps[3]], "
     "'nesterov': True, 'weight_decay': 0.01, 'maximize': True}, {'params': [ps[1]], "
     "'dampening': 0.3}], lr=0.05, momentum=0.9, foreach=False)"},
    // With `params`: parameter 2 is in no group and not stepped.
    {"adam_groups_params_subset",
     "optimizer: adam, lr: 0.02, weight_decay: 0.01, params: \"0,1,3\", param_groups: \"3: "
     "lr=0.05, weight_decay=0, beta2=0.99\"",
     "torch.optim.Adam([{'params': [ps[3]], 'lr': 0.05, 'weight_decay': 0, 'betas': (0.9, "
     "0.99)}, {'params': [ps[0], ps[1]]}], lr=0.02, weight_decay=0.01, foreach=False)"},
};

// Every case's final parameters, computed once by one torch run.
const std::map<std::string, std::vector<float>>& torch_results() {
  static const std::map<std::string, std::vector<float>> results = [] {
    std::vector<std::pair<std::string, std::string>> makers;
    for (const Case& c : kCases) makers.push_back({c.name, c.torch});
    return torch_optim_reference(std::vector<int>(kSteps, kWorld), makers);
  }();
  return results;
}

class TorchParity : public ::testing::TestWithParam<Case> {};

TEST_P(TorchParity, TwentyStepsOnTwoRanksMatchTorchOptim) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const Case c = GetParam();
  const std::vector<float> want = torch_results().at(c.name);  // in the parent, before forking
  ASSERT_EQ(want.size(), total_numel());
  auto results = ddph_test::run_ranks(kWorld, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml(c.options), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    for (int step = 0; step < kSteps; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    const std::vector<float> got = m.flat();
    const WorstElement w =
        worst_element(got, want, [](double x) { return 2e-6 + 1e-5 * std::fabs(x); });
    DDPH_CHILD_CHECK(w.ratio <= 1, "%s: element %zu is %.9g, torch %.9g (%.2f x tolerance)", c.name,
                     w.at, got[w.at], want[w.at], w.ratio);
    // The run did something: against the initial values, parameters moved.
    size_t changed = 0;
    Model fresh;
    const std::vector<float> start = fresh.flat();
    for (size_t i = 0; i < got.size(); ++i) changed += got[i] != start[i];
    DDPH_CHILD_CHECK(changed > got.size() / 3, "%s: only %zu of %zu parameters moved", c.name,
                     changed, got.size());
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, got.data(), got.size() * 4),
                     "%s: parameters differ across ranks", c.name);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchParity, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// The subset cases also pin down which parameters stayed put.
TEST(TorchParity, UnselectedParametersStayAtTheirInitialValues) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const std::pair<const char*, std::vector<int>> cases[] = {{"adam_params_subset", {1, 2}},
                                                            {"adam_groups_params_subset", {2}}};
  Model fresh;
  const std::vector<float> start = fresh.flat();
  for (const auto& [name, still] : cases) {
    const std::vector<float> want = torch_results().at(name);
    size_t at = 0;
    for (int p = 0; p < kParams; ++p)
      for (size_t i = 0; i < numel(p); ++i, ++at) {
        if (std::find(still.begin(), still.end(), p) != still.end())
          EXPECT_EQ(want[at], start[at]) << name << ": param " << p << "[" << i << "]";
        else
          EXPECT_NE(want[at], start[at]) << name << ": param " << p << "[" << i << "]";
      }
  }
}

// The groups matter beyond the tolerance: torch's run without them ends
// far from its run with them, so a hook that ignored param_groups would
// fail adamw_groups above.
TEST(TorchParity, GroupsMoveTheResultBeyondTheTolerance) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const std::vector<float>& grouped = torch_results().at("adamw_groups");
  const std::vector<float>& plain = torch_results().at("adamw");  // the same defaults
  double worst = 0;
  for (size_t i = 0; i < grouped.size(); ++i)
    worst = std::max(worst, std::fabs(double(grouped[i]) - plain[i]) /
                                (2e-6 + 1e-5 * std::fabs(double(grouped[i]))));
  EXPECT_GT(worst, 10) << "the groups change the result by at most " << worst << " x tolerance";
}

}  // namespace
