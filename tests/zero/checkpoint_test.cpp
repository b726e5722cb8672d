// The zero hooks' sharded checkpoints: each rank saves only its shard; the
// shards of every rank, joined back to back, load at another world size
// (resharding), and a shard that is not this rank's, or was cut from
// another layout, is refused with a message naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "core/base/le_bytes.h"
#include "plugins/zero/shard_state.h"
#include "tests/support/checkpoint_layout.h"
#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace {

using namespace ddph_test::optim;

constexpr const char* kAdam = "optimizer: adam, lr: 0.01, weight_decay: 0.01, amsgrad: true";
constexpr int kSaveAt = 5, kSteps = 20;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// Runs steps [first, last) of the model on `world` ranks of `hook` (options
// kAdam + `protocol`), starting from `params` (empty: the initial values)
// and the session state in `state` (empty: none). Each rank writes its
// session state to <out>.<rank>, rank 0 the parameters to <out>.params.
bool run_span(int world, const std::string& hook, const std::string& protocol, int first, int last,
              const std::string& params, const std::string& state, const std::string& out,
              const std::vector<std::vector<int>>& layout = {{0, 1}, {2, 3}}) {
  const std::string config =
      yaml(std::string(kAdam) + ", " + protocol, "{family: default, name: allreduce}", hook);
  auto results = ddph_test::run_ranks(world, [&](int rank, int w, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config, rank, w, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    if (!state.empty()) {
      std::string message;
      DDPH_CHILD_CHECK(ddph_test::load_state(s, state, &message) == DDPH_OK, "load: %s",
                       message.c_str());
    }
    Model m;
    if (!params.empty()) {
      std::vector<float> values(total_numel());
      std::memcpy(values.data(), params.data(), values.size() * 4);
      m.set_flat(values);
    }
    m.with_ids = true;
    m.regroup(layout);
    for (int step = first; step < last; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    write_file(out + "." + std::to_string(rank), ddph_test::session_state(s));
    const std::vector<float> flat = m.flat();
    if (rank == 0)
      write_file(out + ".params",
                 std::string(reinterpret_cast<const char*>(flat.data()), flat.size() * 4));
    ddph_session_close(s);
    return 0;
  });
  if (!ddph_test::all_passed(results)) {
    ADD_FAILURE() << ddph_test::describe(results);
    return false;
  }
  return true;
}

// The session states of ranks 0 .. world - 1 with their zero records'
// blobs joined into one: the consolidated checkpoint (docs/zero.md).
std::string joined_files(const std::vector<std::string>& files) {
  std::vector<ddph_test::layout::Record> all;
  for (const std::string& file : files) {
    std::vector<ddph_test::layout::Record> records;
    std::string why;
    EXPECT_TRUE(ddph_test::layout::parse_container(read_file(file), &records, &why)) << why;
    if (records.size() != 1) return "";
    if (all.empty())
      all = records;
    else
      all[0].blob += records[0].blob;
  }
  return ddph_test::layout::container(all);
}

std::string joined(const std::string& out, int world) {
  std::vector<std::string> files;
  for (int r = 0; r < world; ++r) files.push_back(out + "." + std::to_string(r));
  return joined_files(files);
}

std::vector<float> floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// torch.optim's Adam (kAdam's options) over steps 0..4 on the mean of 2
// ranks' gradients, then steps 5..19 on the mean of 3: a run resumed at
// another world size.
std::vector<float> torch_two_then_three() {
  std::vector<int> worlds(kSaveAt, 2);
  worlds.resize(kSteps, 3);
  return torch_optim_reference(worlds,
                               {{"adam",
                                 "torch.optim.Adam(ps, lr=0.01, weight_decay=0.01, amsgrad=True, "
                                 "foreach=False)"}})
      .at("adam");
}

struct Resume {
  const char* name;
  const char* hook;
  const char* protocol;
};

class ZeroCheckpoint : public ::testing::TestWithParam<Resume> {};

// Steps 0..4 on 2 ranks, save, join the shards, steps 5..19 on 3 ranks:
// equal to torch.optim continuing the same optimizer across the change of
// world (the mean of 2 ranks' gradients, then of 3).
TEST_P(ZeroCheckpoint, SavedOnTwoRanksJoinedAndLoadedOnThreeContinuesAsTorch) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const Resume c = GetParam();
  const std::vector<float> want = torch_two_then_three();
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
  ASSERT_TRUE(run_span(2, c.hook, c.protocol, 0, kSaveAt, "", "", dir + "/two"));
  // Each shard holds only its rank's pieces, and together they hold every
  // element's state once.
  size_t elements = 0;
  for (int r = 0; r < 2; ++r) {
    const std::string shard = ddph_test::hook_blob(read_file(dir + "/two." + std::to_string(r)));
    const ddph::zero::LoadedState loaded = ddph::zero::decode_loaded(
        shard.data(), shard.size(), ddph::optim::OptimKind::kAdam, "test");
    ASSERT_TRUE(loaded.single_shard);
    EXPECT_EQ(loaded.shard.rank, uint32_t(r));
    size_t mine = 0;
    for (const auto& kv : loaded.shard.pieces) {
      mine += kv.second.count;
      EXPECT_EQ(kv.second.state.step, uint64_t(kSaveAt));
      EXPECT_EQ(kv.second.state.max_second.size(), kv.second.count);
    }
    EXPECT_GT(mine, 0u) << "rank " << r;
    EXPECT_LT(mine, total_numel()) << "rank " << r;
    elements += mine;
  }
  EXPECT_EQ(elements, total_numel());
  const std::string consolidated = joined(dir + "/two", 2);
  ASSERT_FALSE(consolidated.empty());
  ASSERT_TRUE(run_span(3, c.hook, c.protocol, kSaveAt, kSteps, read_file(dir + "/two.params"),
                       consolidated, dir + "/three"));
  const std::vector<float> got = floats(read_file(dir + "/three.params"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6 * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
  // Without the state the continuation is another run: the state mattered.
  ASSERT_TRUE(run_span(3, c.hook, c.protocol, kSaveAt, kSteps, read_file(dir + "/two.params"), "",
                       dir + "/fresh"));
  const std::vector<float> fresh = floats(read_file(dir + "/fresh.params"));
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += std::fabs(fresh[i] - want[i]) > 1e-5f;
  EXPECT_GT(differ, got.size() / 2);
}

// Each rank reloads its own shard at the same world: the same bits as the
// uninterrupted run.
// Steps 0..11 on 2 ranks, against steps 0..5, each rank's own shard
// saved, loaded by fresh sessions, and steps 6..11: the same parameter
// bits.
void expect_own_shard_resumes_bit_for_bit(const Resume& c) {
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
  ASSERT_TRUE(run_span(2, c.hook, c.protocol, 0, 12, "", "", dir + "/whole"));
  ASSERT_TRUE(run_span(2, c.hook, c.protocol, 0, 6, "", "", dir + "/half"));
  const std::string config =
      yaml(std::string(kAdam) + ", " + c.protocol, "{family: default, name: allreduce}", c.hook);
  const std::vector<float> at6 = floats(read_file(dir + "/half.params"));
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& d) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, d);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::string message;
    const std::string own = read_file(dir + "/half." + std::to_string(rank));
    DDPH_CHILD_CHECK(ddph_test::load_state(s, own, &message) == DDPH_OK, "%s", message.c_str());
    Model m;
    m.with_ids = true;
    m.set_flat(at6);
    for (int step = 6; step < 12; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    const std::vector<float> want = floats(read_file(dir + "/whole.params"));
    DDPH_CHILD_CHECK(std::memcmp(m.flat().data(), want.data(), want.size() * 4) == 0,
                     "the resumed run differs from the uninterrupted one");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST_P(ZeroCheckpoint, EachRanksOwnShardResumesBitForBit) {
  expect_own_shard_resumes_bit_for_bit(GetParam());
}

// bits 8 and 4: the shard carries the rank's error-feedback residuals, so
// the resumed run quantizes as the uninterrupted one did (restarting them
// at zero would change the codes from step 6 on).
TEST(ZeroCheckpointQuantized, EachRanksOwnShardResumesBitForBitWithItsResiduals) {
  expect_own_shard_resumes_bit_for_bit(
      Resume{"step_bits8", "zero/zero_step", "protocol: reduce_scatter, bits: 8"});
  expect_own_shard_resumes_bit_for_bit(
      Resume{"interleaved_bits4", "zero/zero_step_interleaved",
             "protocol: reduce_scatter, bits: 4, channel_size: 64"});
}

// A version 1 shard, written field by field as shard_state.h lays it out
// (before the residuals and the run id), still loads, with no residuals
// and run id 0 (unknown); the current version keeps both.
TEST(ZeroShardFormat, VersionOneLoadsAndTheCurrentVersionKeepsTheResiduals) {
  ddph::LeWriter body;
  body.put(1, 4);  // adam
  body.put(2, 4);  // world
  body.put(1, 4);  // rank
  body.put(0x1234, 8);
  body.put(1, 4);  // one piece: parameter id 7, elements 0..2, step 5
  body.put(1, 1);
  body.put(7, 8);
  body.put(0, 4);
  body.put(0, 8);
  body.put(3, 8);
  body.put(5, 8);
  body.put_floats({1.f, 2.f, 3.f});
  body.put_floats({4.f, 5.f, 6.f});
  body.put_floats({});
  ddph::LeWriter w;
  const char magic[8] = {'D', 'D', 'P', 'H', 'Z', 'E', 'R', 'O'};
  ddph::put_frame_header(w, magic, 1);
  w.put(12 + 8 + body.bytes().size() + 8, 8);
  w.put_bytes(body.bytes().data(), body.bytes().size());
  const std::string v1 = ddph::finish_frame(w);

  ddph::zero::Shard s =
      ddph::zero::decode_shard(v1.data(), v1.size(), ddph::optim::OptimKind::kAdam, "test");
  EXPECT_EQ(s.world, 2u);
  EXPECT_EQ(s.rank, 1u);
  EXPECT_EQ(s.layout_hash, 0x1234u);
  ASSERT_EQ(s.pieces.size(), 1u);
  const ddph::zero::PieceState& p = s.pieces.begin()->second;
  EXPECT_EQ(p.count, 3u);
  EXPECT_EQ(p.state.step, 5u);
  EXPECT_EQ(p.state.second, (std::vector<float>{4.f, 5.f, 6.f}));
  EXPECT_TRUE(s.residuals.empty());
  EXPECT_EQ(s.run_id, 0u);

  s.residuals[3] = {0.5f, -0.25f};
  s.run_id = 0xfeedbeef12345678u;
  const std::string v2 = ddph::zero::encode_shard(s);
  EXPECT_EQ(uint8_t(v2[8]), 3u) << "the version after the magic";
  const ddph::zero::Shard back =
      ddph::zero::decode_shard(v2.data(), v2.size(), ddph::optim::OptimKind::kAdam, "test");
  EXPECT_EQ(back.residuals, s.residuals);
  EXPECT_EQ(back.run_id, s.run_id);
  EXPECT_EQ(back.pieces.begin()->second.state.momentum, p.state.momentum);
}

INSTANTIATE_TEST_SUITE_P(
    Zero, ZeroCheckpoint,
    ::testing::Values(
        Resume{"step_reduce_scatter", "zero/zero_step", "protocol: reduce_scatter"},
        Resume{"interleaved_allreduce", "zero/zero_step_interleaved", "protocol: allreduce"},
        Resume{"step_shard_buckets", "zero/zero_step", "protocol: allreduce, shard_buckets: true"}),
    [](const ::testing::TestParamInfo<Resume>& i) { return std::string(i.param.name); });

// A consolidated state loaded into a session that already ran (its layout
// known), followed by regrouped buckets at the next step: the state is cut
// for the new layout, not lost in the re-cut.
TEST(ZeroCheckpointRegroup, AStateLoadedMidRunSurvivesARegroupedNextStep) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const std::vector<float> want = torch_two_then_three();
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
  ASSERT_TRUE(
      run_span(2, "zero/zero_step", "protocol: reduce_scatter", 0, kSaveAt, "", "", dir + "/two"));
  const std::string consolidated = joined(dir + "/two", 2);
  const std::vector<float> at5 = floats(read_file(dir + "/two.params"));
  const std::string config = yaml(std::string(kAdam) + ", protocol: reduce_scatter",
                                  "{family: default, name: allreduce}", "zero/zero_step");
  auto results = ddph_test::run_ranks(3, [&](int rank, int world, const std::string& d) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, d);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model scratch;  // a step whose result is dropped: the session learns a layout
    scratch.with_ids = true;
    DDPH_CHILD_CHECK(scratch.step(s, rank, 0) == DDPH_OK, "scratch step");
    std::string message;
    DDPH_CHILD_CHECK(ddph_test::load_state(s, consolidated, &message) == DDPH_OK, "%s",
                     message.c_str());
    Model m;
    m.with_ids = true;
    m.set_flat(at5);
    m.regroup({{3, 0}, {2, 1}});
    for (int step = kSaveAt; step < kSteps; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    const std::vector<float> got = m.flat();
    for (size_t i = 0; i < got.size(); ++i)
      DDPH_CHILD_CHECK(std::fabs(got[i] - want[i]) <= 1e-6 * std::max(1.0f, std::fabs(want[i])),
                       "element %zu is %.9g, torch %.9g", i, got[i], want[i]);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// What load_state refuses, each with the message that names it.
TEST(ZeroCheckpointRefusals, ForeignShardsAndIncompleteJoinsAreNamed) {
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
  ASSERT_TRUE(run_span(2, "zero/zero_step", "protocol: reduce_scatter", 0, 3, "", "", dir + "/rs"));
  ASSERT_TRUE(run_span(2, "zero/zero_step", "protocol: allreduce", 0, 3, "", "", dir + "/ar"));
  const std::string rank1 = read_file(dir + "/rs.1");
  const std::string other_layout = read_file(dir + "/ar.0");
  std::vector<ddph_test::layout::Record> records;
  std::string why;
  ASSERT_TRUE(ddph_test::layout::parse_container(read_file(dir + "/rs.0"), &records, &why));
  std::vector<ddph_test::layout::Record> twice = records;
  twice[0].blob += records[0].blob;  // rank 0's shard twice, rank 1's missing
  const std::string doubled = ddph_test::layout::container(twice);

  const std::string config = yaml(std::string(kAdam) + ", protocol: reduce_scatter",
                                  "{family: default, name: allreduce}", "zero/zero_step");
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& d) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, d);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::string message;
    if (rank == 0) {
      // Rank 1's shard on rank 0.
      DDPH_CHILD_CHECK(ddph_test::load_state(s, rank1, &message) == DDPH_INVALID_ARGUMENT &&
                           message.find("shard of rank 1 of a world of 2, but this is rank 0") !=
                               std::string::npos,
                       "%s", message.c_str());
      DDPH_CHILD_CHECK(ddph_test::load_state(s, doubled, &message) == DDPH_INVALID_ARGUMENT &&
                           message.find("rank 0's shard twice") != std::string::npos,
                       "%s", message.c_str());
    }
    // A shard of protocol allreduce loads (it is this rank's), but the first
    // step finds its layout is another one, on every rank alike, before any
    // parameter moves.
    DDPH_CHILD_CHECK(ddph_test::load_state(s, rank == 0 ? other_layout : read_file(dir + "/ar.1"),
                                           &message) == DDPH_OK,
                     "%s", message.c_str());
    Model m;
    m.with_ids = true;
    const std::vector<float> before = m.flat();
    m.step(s, rank, 0, &message);
    DDPH_CHILD_CHECK(
        message.find("shard of another bucket layout or protocol") != std::string::npos, "%s",
        message.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// The config of the refusal tests: its communicator times out after 3 s,
// so a rank left waiting for another fails with DDPH_TIMEOUT quickly.
std::string refusing_config(const std::string& hook, const std::string& protocol) {
  std::string y =
      yaml(std::string(kAdam) + ", " + protocol, "{family: default, name: allreduce}", hook);
  y.replace(y.find("timeout: 30s"), 12, "timeout: 3s");
  return y;
}

// Loads state[rank] on each of 2 ranks of `config` (a model of `layout`,
// with ids unless `ids` is false), then runs `steps` steps: each must fail
// on every rank with DDPH_INVALID_ARGUMENT and every text of `expected` in
// its message, and no parameter may move.
void expect_refused_after_load(const std::string& config, const std::vector<std::string>& state,
                               const std::vector<std::string>& expected, int steps = 1,
                               const std::function<void(Model&)>& prepare = nullptr) {
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& d) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, d);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::string message;
    DDPH_CHILD_CHECK(ddph_test::load_state(s, state[size_t(rank)], &message) == DDPH_OK, "load: %s",
                     message.c_str());
    Model m;
    m.with_ids = true;
    if (prepare) prepare(m);
    const std::vector<float> before = m.flat();
    for (int step = 0; step < steps; ++step) {
      const ddph_code_t code = m.step(s, rank, uint64_t(step), &message);
      DDPH_CHILD_CHECK(code == DDPH_INVALID_ARGUMENT, "step %d: code %d: %s", step, int(code),
                       message.c_str());
      for (const std::string& e : expected)
        DDPH_CHILD_CHECK(message.find(e) != std::string::npos, "step %d: no '%s' in: %s", step,
                         e.c_str(), message.c_str());
      DDPH_CHILD_CHECK(m.flat() == before, "step %d: a parameter moved", step);
    }
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Each rank's own shard of another bucket layout, loaded into
// zero_step_interleaved: refused at the first step on every rank before
// any parameter moves (bucket 0 is not stepped ahead of the check), and
// again at the next.
TEST(ZeroCheckpointRefusals, AShardOfAnotherLayoutMovesNothingInInterleavedSteps) {
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
  ASSERT_TRUE(run_span(2, "zero/zero_step_interleaved", "protocol: allreduce", 0, 3, "", "",
                       dir + "/other", {{0, 1, 2}, {3}}));
  expect_refused_after_load(
      refusing_config("zero/zero_step_interleaved", "protocol: allreduce"),
      {read_file(dir + "/other.0"), read_file(dir + "/other.1")},
      {"refused on every rank before any parameter moved",
       "rank 0: the checkpoint is a shard of another bucket layout or protocol", "rank 1: the"},
      2);
}

// Rank 0 loads its shard of another protocol, rank 1 its right one: both
// ranks fail naming rank 0 (not a timeout on rank 1), nothing moves, and
// once rank 0 loads its right shard the session steps again.
TEST(ZeroCheckpointRefusals, AForeignShardOnOneRankFailsEveryRankNamingIt) {
  for (const char* hook : {"zero/zero_step", "zero/zero_step_interleaved"}) {
    const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
    ASSERT_TRUE(run_span(2, hook, "protocol: reduce_scatter", 0, 3, "", "", dir + "/rs"));
    ASSERT_TRUE(run_span(2, hook, "protocol: allreduce", 0, 3, "", "", dir + "/ar"));
    const std::string config = refusing_config(hook, "protocol: reduce_scatter");
    auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& d) {
      ddph_session_t* s = ddph_test::open_session(config, rank, world, d);
      DDPH_CHILD_CHECK(s != nullptr, "open failed");
      std::string message;
      const std::string own = read_file(dir + "/rs." + std::to_string(rank));
      DDPH_CHILD_CHECK(
          ddph_test::load_state(s, rank == 0 ? read_file(dir + "/ar.0") : own, &message) == DDPH_OK,
          "load: %s", message.c_str());
      Model m;
      m.with_ids = true;
      const std::vector<float> before = m.flat();
      const ddph_code_t code = m.step(s, rank, 3, &message);
      DDPH_CHILD_CHECK(
          code == DDPH_INVALID_ARGUMENT &&
              message.find("rank 0: the checkpoint is a shard of another bucket layout or "
                           "protocol") != std::string::npos &&
              message.find("rank 1:") == std::string::npos,
          "%s: code %d: %s", hook, int(code), message.c_str());
      DDPH_CHILD_CHECK(m.flat() == before, "%s: a parameter moved", hook);
      DDPH_CHILD_CHECK(ddph_test::load_state(s, own, &message) == DDPH_OK, "reload: %s",
                       message.c_str());
      DDPH_CHILD_CHECK(m.step(s, rank, 3, &message) == DDPH_OK, "%s: after the right load: %s",
                       hook, message.c_str());
      DDPH_CHILD_CHECK(m.flat() != before, "%s: the step after the right load moved nothing", hook);
      ddph_session_close(s);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(results)) << hook << ": " << ddph_test::describe(results);
  }
}

// A consolidated state saved with parameter ids, loaded by a run that gives
// none, or other ids: refused at the first step on every rank, naming the
// parameters missing from it and the ones it holds that the run has not.
TEST(ZeroCheckpointRefusals, AConsolidatedStateOfOtherParameterIdsIsRefusedNamingThem) {
  for (const char* hook : {"zero/zero_step", "zero/zero_step_interleaved"}) {
    const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
    ASSERT_TRUE(run_span(2, hook, "protocol: reduce_scatter", 0, 3, "", "", dir + "/rs"));
    const std::string consolidated = joined(dir + "/rs", 2);
    ASSERT_FALSE(consolidated.empty());
    const std::string config = refusing_config(hook, "protocol: reduce_scatter");
    expect_refused_after_load(config, {consolidated, consolidated},
                              {"it holds no state for parameter 0 of bucket 0",
                               "it holds state for parameter id 0, parameter id 1"},
                              1, [](Model& m) { m.with_ids = false; });
    expect_refused_after_load(config, {consolidated, consolidated},
                              {"it holds no state for parameter id 10, parameter id 12",
                               "it holds state for parameter id 0, parameter id 2, which this run "
                               "has not"},
                              1, [](Model& m) {
                                m.id_of[0] = 10;
                                m.id_of[2] = 12;
                              });
  }
}

// Rank 0's shard of one run and rank 1's of another (same layout, same
// step): joined, the load is refused; loaded each on its rank, the first
// step is refused on every rank, naming both runs.
TEST(ZeroCheckpointRefusals, ShardsOfDifferentRunsAreRefused) {
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-ckpt");
  ASSERT_TRUE(run_span(2, "zero/zero_step", "protocol: reduce_scatter", 0, 3, "", "", dir + "/a"));
  ASSERT_TRUE(run_span(2, "zero/zero_step", "protocol: reduce_scatter", 0, 3, "", "", dir + "/b"));
  const std::string mixed = joined_files({dir + "/a.0", dir + "/b.1"});
  ASSERT_FALSE(mixed.empty());
  const std::string config = refusing_config("zero/zero_step", "protocol: reduce_scatter");
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& d) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, d);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::string message;
    DDPH_CHILD_CHECK(
        ddph_test::load_state(s, mixed, &message) == DDPH_INVALID_ARGUMENT &&
            message.find("the joined shards come from different runs") != std::string::npos,
        "joined: %s", message.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
  expect_refused_after_load(config, {read_file(dir + "/a.0"), read_file(dir + "/b.1")},
                            {"rank 0 loaded the state of run ", " and rank 1 that of run ",
                             "shards of different runs do not belong together"});
}

}  // namespace
