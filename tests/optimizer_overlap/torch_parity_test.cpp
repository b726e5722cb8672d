// hook_then_optimizer against torch.optim: two ranks over Gloo run 20 steps
// of the hook (wrapping default/allreduce) on the same gradients that a
// PyTorch script averages and hands to torch.optim.SGD / Adam / AdamW
// (Debian's /usr/bin/python3, single-tensor path). Final parameters must
// agree to float32 tolerance and be bit-identical across the ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tests/optimizer_overlap/optim_support.h"
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
    std::map<std::string, std::vector<float>> out;
    std::vector<float> init, grads;
    for (int p = 0; p < kParams; ++p)
      for (size_t i = 0; i < numel(p); ++i) init.push_back(initial(p, i));
    for (int s = 0; s < kSteps; ++s)
      for (int r = 0; r < kWorld; ++r)
        for (int p = 0; p < kParams; ++p)
          for (size_t i = 0; i < numel(p); ++i) grads.push_back(gradient(r, uint64_t(s), p, i));
    std::string shapes_text = "[";
    for (const auto& s : shapes()) {
      shapes_text += "(";
      for (int64_t d : s) shapes_text += std::to_string(d) + ",";
      shapes_text += "),";
    }
    shapes_text += "]";
    std::string script =
        "import sys, numpy as np, torch\n"
        "d = sys.argv[1]\n"
        "shapes = " +
        shapes_text +
        "\n"
        "sizes = [int(np.prod(s)) for s in shapes]\n"
        "total = sum(sizes)\n"
        "init = np.fromfile(d + '/init', dtype=np.float32)\n"
        "grads = np.fromfile(d + '/grads', dtype=np.float32).reshape(" +
        std::to_string(kSteps) + ", " + std::to_string(kWorld) +
        ", total)\n"
        "def split(flat):\n"
        "    out, at = [], 0\n"
        "    for s, n in zip(shapes, sizes):\n"
        "        out.append(torch.from_numpy(flat[at:at + n].copy()).reshape(s)); at += n\n"
        "    return out\n"
        "def run(name, make):\n"
        "    ps = [torch.nn.Parameter(t) for t in split(init)]\n"
        "    opt = make(ps)\n"
        "    for s in range(grads.shape[0]):\n"
        "        # default/allreduce: each rank's value divided by the world size, then summed\n"
        "        mean = torch.zeros(total, dtype=torch.float32)\n"
        "        for r in range(grads.shape[1]):\n"
        "            mean = mean + torch.from_numpy(grads[s, r]) / grads.shape[1]\n"
        "        for p, g in zip(ps, split(mean.numpy())):\n"
        "            p.grad = g.clone()\n"
        "        opt.step()\n"
        "    np.concatenate([p.detach().numpy().ravel() for p in ps]).astype(np.float32)"
        ".tofile(d + '/out_' + name)\n";
    std::vector<std::string> names;
    for (const Case& c : kCases) {
      script += "run('" + std::string(c.name) + "', lambda ps: " + c.torch + ")\n";
      names.push_back(std::string("out_") + c.name);
    }
    ddph_test::Blobs blobs = ddph_test::run_torch(
        script, {{"init", ddph_test::to_blob(init)}, {"grads", ddph_test::to_blob(grads)}}, names);
    for (const Case& c : kCases)
      out[c.name] = ddph_test::from_blob<float>(blobs.at(std::string("out_") + c.name));
    return out;
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
