// hook_then_optimizer against torch.optim: two ranks over Gloo run 20 steps
// of the hook (wrapping default/allreduce) on the same gradients that a
// PyTorch script averages and hands to torch.optim.SGD / Adam / AdamW
// (Debian's /usr/bin/python3, single-tensor path). Final parameters must
// agree to float32 tolerance and be bit-identical across the ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tests/support/optim_model.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace {

using namespace ddph_test::optim;

constexpr int kWorld = 2;
constexpr int kSteps = 20;

struct Case {
  const char* name;
  const char* options;  // the hook's YAML options
  const char* torch;    // torch.optim constructor, given the parameter list `ps`
};

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
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(double(got[i]) - want[i]);
      const double tol = 2e-6 + 1e-5 * std::fabs(want[i]);
      if (err / tol > worst) worst = err / tol, at = i;
    }
    DDPH_CHILD_CHECK(worst <= 1, "%s: element %zu is %.9g, torch %.9g (%.2f x tolerance)", c.name,
                     at, got[at], want[at], worst);
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

// The subset case also pins down which parameters stayed put: 1 and 2.
TEST(TorchParity, UnselectedParametersStayAtTheirInitialValues) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const std::vector<float> want = torch_results().at("adam_params_subset");
  Model fresh;
  const std::vector<float> start = fresh.flat();
  size_t at = 0;
  for (int p = 0; p < kParams; ++p)
    for (size_t i = 0; i < numel(p); ++i, ++at) {
      if (p == 1 || p == 2)
        EXPECT_EQ(want[at], start[at]) << "param " << p << "[" << i << "]";
      else
        EXPECT_NE(want[at], start[at]) << "param " << p << "[" << i << "]";
    }
}

}  // namespace
