// post_localsgd and model_averaging on real Gloo ranks, checked against
// exact arithmetic: every value is a small integer scaled so that dividing
// by the group size is exact, so means must match to the bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::FloatBucket;

std::string yaml(const std::string& hook) {
  return "comm: {backend: gloo, timeout: 20s}\nhook: " + hook + "\n";
}

constexpr size_t kN = 7;

// Rank r's gradient element i at step s: a multiple of 4, so a mean over
// 1, 2 or 4 ranks is exact.
float grad(int r, uint64_t s, size_t i) {
  return float(4 * (10 * r + int(i) + 3 * int(s)));
}

float mean_over(const std::vector<int>& ranks, uint64_t s, size_t i) {
  double sum = 0;
  for (int r : ranks) sum += grad(r, s, i);
  return float(sum / double(ranks.size()));
}

std::vector<int> all_ranks(int world) {
  std::vector<int> v;
  for (int r = 0; r < world; ++r) v.push_back(r);
  return v;
}

// Runs one gradient step (a bucket with is_last) and checks every element
// against the mean over `group` (or the rank's own gradient for an empty group).
bool step_gives(ddph_session_t* s, int rank, uint64_t step, const std::vector<int>& group) {
  std::vector<float> g(kN);
  for (size_t i = 0; i < kN; ++i) g[i] = grad(rank, step, i);
  FloatBucket b(g, 0, step, true);
  if (ddph_test::run_bucket(s, b) != DDPH_OK) return false;
  for (size_t i = 0; i < kN; ++i) {
    const float want = group.empty() ? grad(rank, step, i) : mean_over(group, step, i);
    if (g[i] != want) {
      std::fprintf(stderr, "rank %d step %llu [%zu]: %g, want %g\n", rank, (unsigned long long)step,
                   i, g[i], want);
      return false;
    }
  }
  return true;
}

TEST(PostLocalSgd, WorldMeanUntilTheStartThenSubgroupMeans) {
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml("{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 2, "
             "subgroup_size: 2}}"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    const std::vector<int> pair = rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    for (uint64_t step = 0; step < 5; ++step)
      DDPH_CHILD_CHECK(step_gives(s, rank, step, step < 2 ? all_ranks(world) : pair), "step %llu",
                       (unsigned long long)step);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(PostLocalSgd, DefaultSubgroupsAreTheRanksOfOneHost) {
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    setenv("DDPH_HOSTNAME", rank % 2 == 0 ? "host-a" : "host-b", 1);
    ddph_session_t* s = ddph_test::open_session(
        yaml("{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 0}}"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    const std::vector<int> host = rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    DDPH_CHILD_CHECK(step_gives(s, rank, 0, host), "step 0");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(PostLocalSgd, ExplicitSubgroupsAndNoGradientAllreduce) {
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    ddph_session_t* listed = ddph_test::open_session(
        yaml("{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1, "
             "subgroups: '0,3;1,2'}}"),
        rank, world, dir);
    ddph_session_t* none = ddph_test::open_session(
        yaml("{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1, "
             "post_local_gradient_allreduce: false}}"),
        rank, world, dir);
    DDPH_CHILD_CHECK(listed != nullptr && none != nullptr, "open");
    const std::vector<int> mine =
        rank == 0 || rank == 3 ? std::vector<int>{0, 3} : std::vector<int>{1, 2};
    DDPH_CHILD_CHECK(step_gives(listed, rank, 0, all_ranks(world)), "listed, step 0");
    DDPH_CHILD_CHECK(step_gives(listed, rank, 1, mine), "listed, step 1");
    DDPH_CHILD_CHECK(step_gives(none, rank, 0, all_ranks(world)), "none, step 0");
    DDPH_CHILD_CHECK(step_gives(none, rank, 1, {}), "none, step 1: the bucket must stay local");
    ddph_session_close(none);
    ddph_session_close(listed);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// A subgroup's traffic is the session's traffic: its communicator is split
// from the session's, and the wire bytes count both.
TEST(PostLocalSgd, SubgroupBytesCountAsWireBytes) {
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml("{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 0, "
             "subgroup_size: 2}}"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    auto settled = [&] {  // every earlier byte is received once all pass a barrier
      ddph_comm_t* c = ddph_session_comm(s);
      ddph_error_free(c->barrier(c->ctx));
      ddph_stats_t st{};
      st.struct_size = sizeof st;
      ddph_error_free(ddph_session_stats(s, &st));
      return st.wire_bytes;
    };
    const uint64_t before = settled();
    std::vector<float> g(1 << 18, float(rank));  // 1 MiB
    FloatBucket b(g, 0, 0, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_OK, "bucket");
    const uint64_t grew = settled() - before;
    // A ring allreduce over 2 ranks sends half of the bucket twice: 1 MiB.
    DDPH_CHILD_CHECK(grew >= (1u << 20), "wire bytes grew by %llu, expected >= 1 MiB",
                     (unsigned long long)grew);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// The step counter survives a checkpoint: a session loaded after 3 steps of
// a run with start 3 averages inside its subgroup at once, where a fresh one
// would still average over the world. A corrupt blob is refused.
TEST(PostLocalSgd, StepCounterSurvivesACheckpoint) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::string y = yaml(
        "{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 3, "
        "subgroup_size: 1}}");
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a != nullptr, "open a");
    for (uint64_t step = 0; step < 3; ++step)
      DDPH_CHILD_CHECK(step_gives(a, rank, step, all_ranks(world)), "a, step %llu",
                       (unsigned long long)step);
    const std::string blob = ddph_test::session_state(a);
    DDPH_CHILD_CHECK(!blob.empty(), "save_state");
    ddph_session_t* b = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(b != nullptr, "open b");
    std::string bad = blob;
    bad[bad.size() - 9] ^= 0x5a;  // inside the hook's record
    ddph_error_t* e = ddph_session_load_state(b, bad.data(), bad.size());
    DDPH_CHILD_CHECK(e != nullptr, "a corrupt blob was accepted");
    ddph_error_free(e);
    e = ddph_session_load_state(b, blob.data(), blob.size());
    DDPH_CHILD_CHECK(e == nullptr, "load_state: %s", e ? ddph_error_message(e) : "");
    DDPH_CHILD_CHECK(step_gives(b, rank, 3, {rank}), "b, step 3 after loading");
    ddph_session_close(b);
    ddph_session_close(a);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Errors at open, on every rank, naming the option.
TEST(PostLocalSgd, BadOptionsAreRefusedAtOpen) {
  struct Case {
    std::string options;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"{start_localsgd_iter: 1, subgroup_size: 2, bogus: 1}", "bogus"},
      {"{start_localsgd_iter: 1, subgroup_size: 3}",
       "a group size of 3 does not divide the world size 2"},
      {"{start_localsgd_iter: 1, subgroups: '0;0,1'}", "rank 0 is listed twice"},
      {"{start_localsgd_iter: -1}", "start_localsgd_iter"},
  };
  for (const Case& c : cases) {
    auto res = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
      const ddph_test::OpenOutcome o = ddph_test::open_outcome(
          yaml("{family: post_localsgd, name: post_localsgd, options: " + c.options + "}"), rank,
          world, dir);
      DDPH_CHILD_CHECK(o.code != DDPH_OK, "%s was accepted", c.options.c_str());
      DDPH_CHILD_CHECK(o.message.find(c.says) != std::string::npos, "%s: message '%s' lacks '%s'",
                       c.options.c_str(), o.message.c_str(), c.says);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res)) << c.options << "\n" << ddph_test::describe(res);
  }
}

// --- model_averaging ---

// A bucket of two parameters (3 and 2x2 elements) that the host lends.
struct Model {
  std::vector<float> p0, p1;  // the parameters
  std::vector<float> grads = std::vector<float>(7);
  int64_t s0[1] = {3}, s1[2] = {2, 2};
  std::vector<ddph_param_t> params = std::vector<ddph_param_t>(2);
  int64_t n0 = 3, n1 = 4;
};

float init_param(int r, size_t i) {
  return float(8 * (r + 1) + int(i));
}
// A local, rank-dependent update, integer so that means over 2 or 4 ranks
// stay exact.
float update(int r, uint64_t s, size_t i) {
  return float((r * 3 + int(i) + int(s)) % 5 - 2);
}

ddph_param_t param_view(int64_t offset, int ndim, int64_t* shape, float* data, int64_t* numel) {
  ddph_param_t p{};
  p.struct_size = sizeof p;
  p.offset = offset;
  p.ndim = ndim;
  p.shape = shape;
  p.data.data = data;
  p.data.device = {kDLCPU, 0};
  p.data.ndim = 1;
  p.data.dtype = {kDLFloat, 32, 1};
  p.data.shape = numel;
  return p;
}

// Every rank's parameters, simulated in double: a local update each step,
// then the mean over the averaging group where `group_at` names one.
using Groups = std::vector<std::vector<int>>;
std::vector<std::vector<double>> simulate(int world, uint64_t steps,
                                          const std::function<Groups(uint64_t)>& group_at) {
  std::vector<std::vector<double>> p(size_t(world), std::vector<double>(7));
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < 7; ++i) p[size_t(r)][i] = init_param(r, i);
  for (uint64_t s = 0; s < steps; ++s) {
    for (const std::vector<int>& g : group_at(s))  // the hook averages first
      for (size_t i = 0; i < 7; ++i) {
        double sum = 0;
        for (int r : g) sum += p[size_t(r)][i];
        for (int r : g) p[size_t(r)][i] = sum / double(g.size());
      }
    for (int r = 0; r < world; ++r)  // then the host's local step
      for (size_t i = 0; i < 7; ++i) p[size_t(r)][i] -= update(r, s, i);
  }
  return p;
}

int run_model(int rank, int world, const std::string& dir, const std::string& options,
              uint64_t steps, const std::function<Groups(uint64_t)>& group_at) {
  ddph_session_t* s = ddph_test::open_session(
      yaml("{family: post_localsgd, name: model_averaging, options: " + options +
           ", wrap: {family: debugging, name: noop}}"),
      rank, world, dir);
  DDPH_CHILD_CHECK(s != nullptr, "open");
  Model m;
  for (size_t i = 0; i < 3; ++i) m.p0.push_back(init_param(rank, i));
  for (size_t i = 3; i < 7; ++i) m.p1.push_back(init_param(rank, i));
  m.params[0] = param_view(0, 1, m.s0, m.p0.data(), &m.n0);
  m.params[1] = param_view(3, 2, m.s1, m.p1.data(), &m.n1);
  for (uint64_t step = 0; step < steps; ++step) {
    FloatBucket b(m.grads, 0, step, true);
    b.bucket.num_params = 2;
    b.bucket.params = m.params.data();
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_OK, "step %llu", (unsigned long long)step);
    // Right after an averaging step the whole group holds the same values;
    // after a world average, every rank does.
    const std::vector<std::vector<double>> want = simulate(world, step + 1, group_at);
    std::vector<float> mine(m.p0);
    mine.insert(mine.end(), m.p1.begin(), m.p1.end());
    for (size_t i = 0; i < 7; ++i) {
      const double before_update = want[size_t(rank)][i] + update(rank, step, i);
      DDPH_CHILD_CHECK(double(mine[i]) == before_update, "step %llu [%zu]: %g, want %g",
                       (unsigned long long)step, i, double(mine[i]), before_update);
    }
    if (group_at(step).size() == 1)
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, mine.data(), 7 * sizeof(float)),
                       "ranks differ right after a world average at step %llu",
                       (unsigned long long)step);
    for (size_t i = 0; i < 3; ++i) m.p0[i] -= update(rank, step, i);
    for (size_t i = 3; i < 7; ++i) m.p1[i - 3] -= update(rank, step, i);
  }
  ddph_session_close(s);
  return 0;
}

TEST(ModelAveraging, PeriodicAfterWarmupMatchesPyTorchsSchedule) {
  // PeriodicModelAverager(period 3, warmup_steps 2): steps 2, 5, 8.
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    auto group_at = [world](uint64_t s) {
      return s >= 2 && (s - 2) % 3 == 0 ? Groups{all_ranks(world)} : Groups{};
    };
    return run_model(rank, world, dir, "{period: 3, warmup_steps: 2}", 9, group_at);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(ModelAveraging, HierarchicalPairsThenEveryone) {
  // HierarchicalModelAverager({2: 2, 4: 4}, warmup_steps 1): steps divisible
  // by 4 average everyone, other even steps the pairs {0,1} and {2,3}.
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    auto group_at = [world](uint64_t s) {
      if (s < 1) return Groups{};
      if (s % 4 == 0) return Groups{all_ranks(world)};
      if (s % 2 == 0) return Groups{{0, 1}, {2, 3}};
      return Groups{};
    };
    return run_model(rank, world, dir, "{hierarchy: '2:2,4:4', warmup_steps: 1}", 9, group_at);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(ModelAveraging, BadHierarchiesAndMissingParamsAreRefused) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"'2:1'", "the last group size, 1, must be the world size 2"},
        {"'4:1,2:2'", "periods must increase"},
        {"'2-2'", "'2-2' is not PERIOD:GROUP_SIZE"},
        {"'2:3,4:2'", "a group size of 3 does not divide the world size 2"},
    };
    for (const auto& [hierarchy, says] : bad) {
      const ddph_test::OpenOutcome o = ddph_test::open_outcome(
          yaml("{family: post_localsgd, name: model_averaging, options: {hierarchy: " + hierarchy +
               "}, wrap: {family: debugging, name: noop}}"),
          rank, world, dir + "/" + std::to_string(says.size()));
      DDPH_CHILD_CHECK(o.code != DDPH_OK, "hierarchy %s was accepted", hierarchy.c_str());
      DDPH_CHILD_CHECK(o.message.find(says) != std::string::npos, "hierarchy %s: '%s' lacks '%s'",
                       hierarchy.c_str(), o.message.c_str(), says.c_str());
    }
    // A bucket without the parameters' data: an error naming the field.
    ddph_session_t* s = ddph_test::open_session(
        yaml("{family: post_localsgd, name: model_averaging, options: {period: 1}, wrap: "
             "{family: debugging, name: noop}}"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::vector<float> g(4, 1.0f);
    int64_t shape[1] = {4};
    ddph_param_t p = param_view(0, 1, shape, nullptr, shape);
    FloatBucket b(g, 0, 0, true);
    b.bucket.num_params = 1;
    b.bucket.params = &p;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_INVALID_ARGUMENT,
                     "a NULL params[0].data was accepted");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
