// The hierarchical wrapper on 4 real Gloo processes as 2 simulated machines
// ({0, 1} and {2, 3}): its result against exact means and against its inner
// hook run flat, the same bits on every rank, the bytes that cross between
// the machines, checkpoints, and the configs it refuses.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "tests/hierarchical/hier_ranks.h"
#include "tests/support/checkpoint_layout.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#include "tests/support/shaped_bucket.h"

namespace {

using namespace ddph_test::hier;
using ddph_test::FloatBucket;

constexpr size_t kN = 1000;

// Small multiples of 4: every mean over 1, 2 or 4 ranks, and every cast to
// float16, is exact, so the two-level mean must match the flat one bit for bit.
std::vector<std::vector<float>> exact_grads(uint64_t step) {
  std::vector<std::vector<float>> g(kWorld, std::vector<float>(kN));
  for (int r = 0; r < kWorld; ++r)
    for (size_t i = 0; i < kN; ++i)
      g[size_t(r)][i] = float(4 * ((int(i) * 7 + r * 13 + int(step) * 5) % 41 - 20));
  return g;
}

// Smooth values on [-1, 1] whose quantization is not exact.
std::vector<std::vector<float>> real_grads(uint64_t step) {
  std::vector<std::vector<float>> g(kWorld, std::vector<float>(kN));
  for (int r = 0; r < kWorld; ++r)
    for (size_t i = 0; i < kN; ++i)
      g[size_t(r)][i] = float(std::sin(0.37 * double(i) + 1.3 * r + 0.7 * double(step)));
  return g;
}

// Runs one bucket of `data` (in place) through s.
bool run(ddph_session_t* s, std::vector<float>& data, uint64_t step) {
  FloatBucket b(data, 0, step, true);
  return ddph_test::run_bucket(s, b) == DDPH_OK;
}

std::string subdir(const std::string& dir, const char* name) {
  const std::string d = dir + "/" + name;
  mkdir(d.c_str(), 0700);
  return d;
}

struct InnerCase {
  const char* label;
  std::string inner;  // YAML flow map
  bool exact;         // the flat inner hook gives the exact mean on exact_grads
};

std::vector<InnerCase> inner_cases() {
  return {
      {"allreduce", "{family: default, name: allreduce}", true},
      {"fp16_compress", "{family: default, name: fp16_compress}", true},
      {"fp16_wrapper_around_allreduce",
       "{family: default, name: fp16_wrapper, wrap: {family: default, name: allreduce}}", true},
      {"quantization_rs8",
       "{family: quantization, name: per_tensor, options: {protocol: reduce_scatter}}", false},
  };
}

// Test names print the label, not the struct's bytes.
void PrintTo(const InnerCase& c, std::ostream* os) {
  *os << c.label;
}

class HierarchicalInner : public ::testing::TestWithParam<InnerCase> {};

// Per bucket: the hierarchical result is the same bits on every rank; it is
// exactly what the flat inner hook gives on 2 ranks fed the machines' means
// (the leaders run that reference session); and it is the world mean, to
// the bit where the inner hook is exact, else within 1.5 quantization steps,
// as is the flat inner hook on 4 ranks.
TEST_P(HierarchicalInner, MatchesTheFlatInnerHook) {
  const InnerCase c = GetParam();
  auto res = ddph_test::run_ranks(kWorld, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* h = ddph_test::open_session(yaml(hier_hook(c.inner)), rank, world, dir);
    ddph_session_t* f = ddph_test::open_session(yaml(c.inner), rank, world, dir);
    DDPH_CHILD_CHECK(h != nullptr && f != nullptr, "open");
    // Opened last, by the leaders only, in a store of its own.
    ddph_session_t* ref = nullptr;
    if (is_leader(rank)) {
      ref = ddph_test::open_session(yaml(c.inner), machine_of(rank), world / kLocal,
                                    subdir(dir, "leaders"));
      DDPH_CHILD_CHECK(ref != nullptr, "open the leaders' reference");
    }
    for (uint64_t step = 0; step < 3; ++step) {
      const auto g = c.exact ? exact_grads(step) : real_grads(step);
      std::vector<float> hv = g[size_t(rank)], fv = g[size_t(rank)];
      DDPH_CHILD_CHECK(run(h, hv, step) && run(f, fv, step), "step %d", int(step));
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(h, hv.data(), hv.size() * sizeof(float)),
                       "step %d: ranks differ", int(step));
      if (ref != nullptr) {
        const int m = machine_of(rank);
        const auto local = mean_over(g, {m * kLocal, m * kLocal + 1});
        std::vector<float> rv(local.begin(), local.end());  // exact: a mean of 2 floats
        DDPH_CHILD_CHECK(run(ref, rv, step), "reference step %d", int(step));
        DDPH_CHILD_CHECK(rv == hv,
                         "step %d: differs from the flat inner hook on the machines' means",
                         int(step));
      }
      const auto mean = mean_over(g, {0, 1, 2, 3});
      // 8-bit codes over values spanning [-1, 1]: a step of 2/255; the
      // reduce_scatter protocol rounds twice (the chunks, then their mean).
      const double tol = c.exact ? 0.0 : 1.5 * 2.0 / 255.0;
      for (size_t i = 0; i < kN; ++i) {
        DDPH_CHILD_CHECK(std::fabs(hv[i] - mean[i]) <= tol, "step %d [%zu]: %.9g, mean %.9g",
                         int(step), i, hv[i], mean[i]);
        DDPH_CHILD_CHECK(std::fabs(fv[i] - mean[i]) <= tol, "flat, step %d [%zu]: %.9g, mean %.9g",
                         int(step), i, fv[i], mean[i]);
      }
    }
    if (std::string(c.label) == "allreduce") {
      // Bytes in: the buckets. Bytes out: the machine's allreduce and
      // broadcast, plus, on a leader, what its inner allreduce gave to
      // collectives (all fp32, uncompressed).
      ddph_stats_t st{};
      st.struct_size = sizeof st;
      ddph_error_free(ddph_session_stats(h, &st));
      const uint64_t bucket = kN * sizeof(float);
      DDPH_CHILD_CHECK(st.bytes_in == 3 * bucket, "bytes_in %llu", (unsigned long long)st.bytes_in);
      const uint64_t out = 3 * bucket * (is_leader(rank) ? 3 : 2);
      DDPH_CHILD_CHECK(st.bytes_out == out, "bytes_out %llu, want %llu",
                       (unsigned long long)st.bytes_out, (unsigned long long)out);
    }
    ddph_session_close(ref);
    ddph_session_close(f);
    ddph_session_close(h);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

INSTANTIATE_TEST_SUITE_P(Inner, HierarchicalInner, ::testing::ValuesIn(inner_cases()),
                         [](const ::testing::TestParamInfo<InnerCase>& i) {
                           return std::string(i.param.label);
                         });

void run_powersgd_case(const std::string& inner);

// PowerSGD (rank 1, compressing from step 2): the exact world mean before,
// then, step after step (its state carried along), exactly the flat
// PowerSGD on 2 ranks fed the machines' means. Also with fp16_wrapper around
// PowerSGD: a wrapped wrapper that the leaders make, run and keep the state
// of as one chain.
TEST(Hierarchical, PowerSgdMatchesFlatPowerSgdOnTheMachinesMeans) {
  const std::string psgd =
      "{family: powersgd, name: powersgd, options: {rank: 1, start_iter: 2, "
      "min_compression_rate: 0}}";
  for (const std::string& inner :
       {psgd, "{family: default, name: fp16_wrapper, wrap: " + psgd + "}"}) {
    SCOPED_TRACE(inner);
    run_powersgd_case(inner);
  }
}

void run_powersgd_case(const std::string& inner) {
  auto res = ddph_test::run_ranks(kWorld, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* h = ddph_test::open_session(yaml(hier_hook(inner)), rank, world, dir);
    DDPH_CHILD_CHECK(h != nullptr, "open");
    ddph_session_t* ref = nullptr;
    if (is_leader(rank)) {
      ref = ddph_test::open_session(yaml(inner), machine_of(rank), world / kLocal,
                                    subdir(dir, "leaders"));
      DDPH_CHILD_CHECK(ref != nullptr, "open the leaders' reference");
    }
    const std::vector<ddph_test::Shape> shapes = {{20, 30}, {400}};
    for (uint64_t step = 0; step < 5; ++step) {
      std::vector<std::vector<float>> g(kWorld, std::vector<float>(kN));
      for (int r = 0; r < kWorld; ++r)
        for (size_t i = 0; i < kN; ++i)
          g[size_t(r)][i] = float(4 * ((int(i) * 11 + r * 3 + int(step) * 7) % 29 - 14));
      std::vector<float> hv = g[size_t(rank)];
      DDPH_CHILD_CHECK(ddph_test::run_shaped(h, hv, shapes, 0, step, true) == DDPH_OK, "step %d",
                       int(step));
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(h, hv.data(), hv.size() * sizeof(float)),
                       "step %d: ranks differ", int(step));
      if (step < 2) {
        const auto mean = mean_over(g, {0, 1, 2, 3});
        DDPH_CHILD_CHECK(std::equal(hv.begin(), hv.end(), mean.begin()),
                         "step %d: not the exact mean before start_iter", int(step));
      }
      if (ref != nullptr) {
        const int m = machine_of(rank);
        const auto local = mean_over(g, {m * kLocal, m * kLocal + 1});
        std::vector<float> rv(local.begin(), local.end());
        DDPH_CHILD_CHECK(ddph_test::run_shaped(ref, rv, shapes, 0, step, true) == DDPH_OK,
                         "reference step %d", int(step));
        DDPH_CHILD_CHECK(rv == hv, "step %d: differs from flat PowerSGD on the machines' means",
                         int(step));
      }
    }
    ddph_session_close(ref);
    ddph_session_close(h);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Shapes other than 2 x 2: three machines of two (the leaders' communicator
// has 3 ranks), one machine of three (the leaders' has 1), three machines
// of one (no machine communicator). Values are multiples of 12, so every
// mean is exact and must match the world mean bit for bit.
TEST(Hierarchical, OtherMachineShapesGiveTheWorldMean) {
  struct Shape {
    int world, local;
  };
  for (const Shape sh : {Shape{6, 2}, Shape{3, 3}, Shape{3, 1}}) {
    auto res = ddph_test::run_ranks(sh.world, [&](int rank, int world, const std::string& dir) {
      ddph_session_t* h = ddph_test::open_session(
          yaml(hier_hook("{family: default, name: allreduce}", sh.local)), rank, world, dir);
      DDPH_CHILD_CHECK(h != nullptr, "open");
      auto g = std::vector<std::vector<float>>(size_t(world), std::vector<float>(kN));
      for (int r = 0; r < world; ++r)
        for (size_t i = 0; i < kN; ++i)
          g[size_t(r)][i] = float(12 * ((int(i) * 5 + r * 7) % 19 - 9));
      std::vector<int> all;
      for (int r = 0; r < world; ++r) all.push_back(r);
      const auto mean = mean_over(g, all);
      std::vector<float> v = g[size_t(rank)];
      DDPH_CHILD_CHECK(run(h, v, 0), "bucket");
      DDPH_CHILD_CHECK(std::equal(v.begin(), v.end(), mean.begin()),
                       "world %d, local %d: not the exact world mean", world, sh.local);
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(h, v.data(), v.size() * sizeof(float)),
                       "ranks differ");
      ddph_session_close(h);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res))
        << "world " << sh.world << ", local " << sh.local << ": " << ddph_test::describe(res);
  }
}

// hierarchical as the inner hook of a wrapper (fp16_wrapper around it, on
// the session's communicator): its result lands in the bucket on every
// rank, so the wrapper casts back the exact mean.
TEST(Hierarchical, WrappedByAnotherWrapper) {
  auto res = ddph_test::run_ranks(kWorld, [](int rank, int world, const std::string& dir) {
    ddph_session_t* h =
        ddph_test::open_session(yaml("{family: default, name: fp16_wrapper, wrap: " +
                                     hier_hook("{family: default, name: allreduce}") + "}"),
                                rank, world, dir);
    DDPH_CHILD_CHECK(h != nullptr, "open");
    const auto g = exact_grads(0);
    const auto mean = mean_over(g, {0, 1, 2, 3});
    std::vector<float> v = g[size_t(rank)];
    DDPH_CHILD_CHECK(run(h, v, 0), "bucket");
    DDPH_CHILD_CHECK(std::equal(v.begin(), v.end(), mean.begin()), "not the exact mean");
    ddph_session_close(h);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// The bytes one machine sends the other: measured per peer on the sockets
// (bytes_sent_to), for the flat inner hook and for the hierarchical wrapper
// around it, on a 4 MiB bucket. Machines come from the host names here
// (local_size -1). Only the leaders talk across, each for its machine, so
// the bytes drop by the local size for a hook whose traffic to each peer
// shrinks with the world (quantization's reduce_scatter protocol); the
// figure for fp16_compress (Gloo's own allreduce) is printed for the record.
TEST(Hierarchical, BytesBetweenMachinesDropByTheLocalSize) {
  struct Case {
    const char* label;
    std::string inner;
    bool asserted;
  };
  const std::vector<Case> cases = {
      {"quantization per_tensor reduce_scatter 8 bits",
       "{family: quantization, name: per_tensor, options: {protocol: reduce_scatter}}", true},
      {"fp16_compress", "{family: default, name: fp16_compress}", false},
  };
  for (const Case& c : cases) {
    auto res = ddph_test::run_ranks(kWorld, [&](int rank, int world, const std::string& dir) {
      setenv("DDPH_HOSTNAME", machine_of(rank) == 0 ? "machine-a" : "machine-b", 1);
      ddph_session_t* f = ddph_test::open_session(yaml(c.inner), rank, world, dir);
      ddph_session_t* h = ddph_test::open_session(yaml(hier_hook(c.inner, -1)), rank, world, dir);
      DDPH_CHILD_CHECK(f != nullptr && h != nullptr, "open");
      uint64_t cross[2] = {0, 0};
      ddph_session_t* sessions[2] = {f, h};
      for (int k = 0; k < 2; ++k) {
        std::vector<float> g(1 << 20);
        for (size_t i = 0; i < g.size(); ++i) g[i] = float(std::sin(0.001 * double(i) + rank));
        const uint64_t before = cross_machine_bytes(sessions[k], rank);
        DDPH_CHILD_CHECK(before != UINT64_MAX, "the communicator has no bytes_sent_to");
        DDPH_CHILD_CHECK(run(sessions[k], g, 0), "bucket");
        cross[k] = sum_over_ranks(sessions[k], cross_machine_bytes(sessions[k], rank) - before);
      }
      const double ratio = double(cross[0]) / double(cross[1]);
      if (rank == 0)
        std::printf(
            "[hierarchical] %s, 4 MiB bucket, 4 ranks as 2 machines: bytes between "
            "machines flat %llu, hierarchical %llu, ratio %.2f (local size %d)\n",
            c.label, (unsigned long long)cross[0], (unsigned long long)cross[1], ratio, kLocal);
      DDPH_CHILD_CHECK(cross[1] > 0, "the leaders sent nothing across");
      if (c.asserted)
        DDPH_CHILD_CHECK(ratio > 0.85 * kLocal && ratio < 1.15 * kLocal,
                         "%s: flat/hierarchical bytes between machines %.2f, expected about %d",
                         c.label, ratio, kLocal);
      ddph_session_close(h);
      ddph_session_close(f);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res)) << c.label << ": " << ddph_test::describe(res);
  }
}

// The inner hook's state lives on the leaders, which checkpoint it; other
// ranks' blobs hold none. Rank 0's blob loads on every rank (as a flat
// hook's does); a non-leader's blob is refused on a leader by name; and a
// session whose leaders load their own blobs (error feedback differs from
// leader to leader) goes on exactly as the original. Every single-byte
// change of a blob is refused on every rank.
TEST(Hierarchical, CheckpointsHoldTheLeadersState) {
  auto res = ddph_test::run_ranks(kWorld, [](int rank, int world, const std::string& dir) {
    const std::string y =
        yaml(hier_hook("{family: powersgd, name: powersgd, options: {rank: 1, start_iter: 2, "
                       "min_compression_rate: 0}}"));
    const std::vector<ddph_test::Shape> shapes = {{20, 30}, {400}};
    auto grads = [&](uint64_t step) {
      std::vector<float> v(kN);
      for (size_t i = 0; i < kN; ++i) v[i] = float(std::cos(0.1 * double(i) * (rank + 1) + step));
      return v;
    };
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    ddph_session_t* b = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a != nullptr && b != nullptr, "open");
    for (uint64_t step = 0; step < 4; ++step) {  // compressing, with error feedback, from step 2
      std::vector<float> v = grads(step);
      DDPH_CHILD_CHECK(ddph_test::run_shaped(a, v, shapes, 0, step, true) == DDPH_OK, "a, step %d",
                       int(step));
    }
    const std::string mine = ddph_test::session_state(a);
    DDPH_CHILD_CHECK(!mine.empty(), "save_state");
    // Every rank's blob reaches every rank through files.
    const std::string path = dir + "/blob" + std::to_string(rank);
    std::ofstream(path + ".tmp", std::ios::binary) << mine;
    std::rename((path + ".tmp").c_str(), path.c_str());
    ddph_comm_t* c = ddph_session_comm(a);
    ddph_error_free(c->barrier(c->ctx));
    auto read = [&](int r) {
      std::ifstream in(dir + "/blob" + std::to_string(r), std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string from0 = read(0), from1 = read(1), from_leader = read(rank - rank % kLocal);
    if (is_leader(rank)) {
      ddph_error_t* e = ddph_session_load_state(b, from1.data(), from1.size());
      DDPH_CHILD_CHECK(e != nullptr && std::string(ddph_error_message(e))
                                               .find("not a machine "
                                                     "leader") != std::string::npos,
                       "a non-leader's blob on a leader: %s",
                       e ? ddph_error_message(e) : "accepted");
      ddph_error_free(e);
    }
    ddph_error_t* e = ddph_session_load_state(b, from0.data(), from0.size());
    DDPH_CHILD_CHECK(e == nullptr, "load rank 0's blob: %s", e ? ddph_error_message(e) : "");
    e = ddph_session_load_state(b, from_leader.data(), from_leader.size());
    DDPH_CHILD_CHECK(e == nullptr, "load the leader's blob: %s", e ? ddph_error_message(e) : "");
    // Every single-byte change of rank 0's hierarchical blob, in a valid
    // container, is refused on every rank: the checksum covers the inner
    // state too, also where a rank skips it. The steps below then show that
    // nothing refused changed b's state.
    std::vector<ddph_test::layout::Record> records;
    std::string why;
    DDPH_CHILD_CHECK(ddph_test::layout::valid_session_state(from0, &why) &&
                         ddph_test::layout::parse_container(from0, &records, &why) &&
                         records.size() == 1 && records[0].family == "hierarchical",
                     "rank 0's blob: %s", why.c_str());
    size_t offered = 0;
    const size_t accepted = ddph_test::accepted_byte_changes(b, from0, &offered);
    DDPH_CHILD_CHECK(accepted == 0, "%zu of %zu single-byte changes were not refused", accepted,
                     offered);
    for (uint64_t step = 4; step < 6; ++step) {
      std::vector<float> va = grads(step), vb = grads(step);
      DDPH_CHILD_CHECK(ddph_test::run_shaped(a, va, shapes, 0, step, true) == DDPH_OK &&
                           ddph_test::run_shaped(b, vb, shapes, 0, step, true) == DDPH_OK,
                       "step %d", int(step));
      DDPH_CHILD_CHECK(va == vb, "step %d: the restored session differs from the original",
                       int(step));
    }
    ddph_session_close(b);
    ddph_session_close(a);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Refused at open on every rank, with a message that names the problem.
TEST(Hierarchical, BadConfigsAreRefusedAtOpen) {
  struct Case {
    std::string hook;
    const char* hosts;  // per rank, or NULL
    const char* says;
  };
  const std::string allreduce = "{family: default, name: allreduce}";
  const std::vector<Case> cases = {
      {hier_hook(allreduce, 3), nullptr, "local_size 3 does not divide the world size 4"},
      {hier_hook(allreduce, 0), nullptr, "local_size 0 is not a number of ranks per machine"},
      {hier_hook(allreduce, -1), "aaab",
       "machines hold different numbers of ranks ('a': 3, 'b': 1)"},
      {hier_hook("{family: optimizer_overlap, name: hook_then_optimizer, options: {optimizer: "
                 "sgd, lr: 0.1}, wrap: {family: default, name: allreduce}}"),
       nullptr, "works on the parameters"},
      {"{family: hierarchical, name: hierarchical, options: {local_size: 2}}", nullptr,
       "is a wrapper"},
  };
  for (const Case& c : cases) {
    auto res = ddph_test::run_ranks(kWorld, [&](int rank, int world, const std::string& dir) {
      if (c.hosts != nullptr) setenv("DDPH_HOSTNAME", std::string(1, c.hosts[rank]).c_str(), 1);
      const ddph_test::OpenOutcome o = ddph_test::open_outcome(yaml(c.hook), rank, world, dir);
      DDPH_CHILD_CHECK(o.code != DDPH_OK, "%s was accepted", c.hook.c_str());
      DDPH_CHILD_CHECK(o.message.find(c.says) != std::string::npos, "message '%s' lacks '%s'",
                       o.message.c_str(), c.says);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res)) << c.says << ": " << ddph_test::describe(res);
  }
}

}  // namespace
