// hook_then_optimizer on real Gloo ranks: a checkpoint taken mid-run
// resumes bit for bit, corrupt and foreign blobs are refused, a wrapped
// hook whose result lands elsewhere is refused at create time, bad options
// (param_groups' among them) and unshared parameters get errors that name
// the problem; parameter groups name ids or positions as `params` does.
#include <gtest/gtest.h>

#include <cstring>

#include "core/base/error.h"
#include "core/base/le_bytes.h"
#include "core/optim/functional_optim.h"
#include "core/optim/state_blob.h"
#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::optim;
namespace core_optim = ddph::optim;

// Opens yaml on this rank and returns the error text ("" on success).
std::string open_error(const std::string& yaml, int rank, int world, const std::string& dir) {
  std::string error;
  ddph_session_close(ddph_test::open_session(yaml, rank, world, dir, &error));
  return error;
}

// Run A: 20 steps, saving after step 10. Run B: a fresh session loads that
// blob and the parameters of step 10, then runs steps 10..19: same bits as A.
// Run C does the same without the blob and must differ (the state matters).
// Around plain allreduce, and around stateful, compressing inner hooks of
// other families, whose state travels in the same session blob.
class Checkpoint : public ::testing::TestWithParam<const char*> {};

TEST_P(Checkpoint, MidRunResumesBitForBit) {
  const std::string inner = GetParam();
  const bool plain = inner.find("default") != std::string::npos;
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    const std::string y =
        yaml("optimizer: adam, lr: 0.01, amsgrad: true, weight_decay: 0.01", inner);
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a != nullptr, "open a");
    Model ma;
    for (int step = 0; step < 10; ++step)
      DDPH_CHILD_CHECK(ma.step(a, rank, uint64_t(step)) == DDPH_OK, "a step %d", step);
    const std::string blob = ddph_test::session_state(a);
    const std::vector<float> at10 = ma.flat();
    for (int step = 10; step < 20; ++step)
      DDPH_CHILD_CHECK(ma.step(a, rank, uint64_t(step)) == DDPH_OK, "a step %d", step);
    ddph_session_close(a);

    // The hook's own blob (the only record around plain allreduce) decodes
    // to 4 parameters at step 10, with every buffer.
    if (plain) {
      const std::string hook = ddph_test::hook_blob(blob);
      const core_optim::StateMap states =
          core_optim::decode_state(hook.data(), hook.size(), core_optim::OptimKind::kAdam);
      DDPH_CHILD_CHECK(states.size() == 4, "%zu parameter states", states.size());
      for (const auto& kv : states)
        DDPH_CHILD_CHECK(kv.second.step == 10 && !kv.second.max_second.empty(),
                         "state of bucket %d param %d: step %d", int(kv.first.id_or_bucket),
                         int(kv.first.position_in_bucket), int(kv.second.step));
    }

    for (int with_blob = 1; with_blob >= 0; --with_blob) {
      ddph_session_t* b = ddph_test::open_session(y, rank, world, dir);
      DDPH_CHILD_CHECK(b != nullptr, "open b");
      if (with_blob) {
        ddph_error_t* e = ddph_session_load_state(b, blob.data(), blob.size());
        DDPH_CHILD_CHECK(e == nullptr, "load: %s", ddph_error_message(e));
      }
      Model mb;
      mb.set_flat(at10);
      for (int step = 10; step < 20; ++step)
        DDPH_CHILD_CHECK(mb.step(b, rank, uint64_t(step)) == DDPH_OK, "b step %d", step);
      const bool same = std::memcmp(ma.flat().data(), mb.flat().data(), total_numel() * 4) == 0;
      DDPH_CHILD_CHECK(same == bool(with_blob), "%s: %s", inner.c_str(),
                       with_blob ? "resumed run differs" : "a run without the state matches");
      ddph_session_close(b);
    }
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(
    Inner, Checkpoint,
    ::testing::Values("{family: default, name: allreduce}",
                      "{family: quantization, name: per_channel, options: {protocol: "
                      "reduce_scatter, bits: 4, error_feedback: true, channel_size: 8}}",
                      "{family: powersgd, name: powersgd, options: {rank: 1, start_iter: 2, "
                      "min_compression_rate: 1}}"),
    [](const ::testing::TestParamInfo<const char*>& i) {
      const std::string s = i.param;
      return s.substr(s.find(' ') + 1, s.find(',') - s.find(' ') - 1);
    });

TEST(State, CorruptAndForeignBlobsAreRefused) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    ddph_session_t* adam = ddph_test::open_session(yaml("optimizer: adam"), rank, world, dir);
    ddph_session_t* sgd =
        ddph_test::open_session(yaml("optimizer: sgd, momentum: 0.9"), rank, world, dir);
    DDPH_CHILD_CHECK(adam && sgd, "open");
    Model m;
    DDPH_CHILD_CHECK(m.step(adam, rank, 0) == DDPH_OK && m.step(sgd, rank, 0) == DDPH_OK, "step");
    const std::string blob = ddph_test::session_state(adam);
    std::string bad = blob;
    const size_t at = bad.find("DDPHOPTM");
    DDPH_CHILD_CHECK(at != std::string::npos, "magic not found");
    bad[at + 40] ^= 1;  // a byte of the first parameter's state
    ddph_error_t* e = ddph_session_load_state(adam, bad.data(), bad.size());
    DDPH_CHILD_CHECK(ddph_error_code(e) == DDPH_INVALID_ARGUMENT &&
                         std::strstr(ddph_error_message(e), "checksum") != nullptr,
                     "corrupt blob: %s", ddph_error_message(e));
    ddph_error_free(e);
    e = ddph_session_load_state(sgd, blob.data(), blob.size());
    DDPH_CHILD_CHECK(ddph_error_code(e) == DDPH_INVALID_ARGUMENT &&
                         std::strstr(ddph_error_message(e), "saved by optimizer adam") != nullptr,
                     "foreign blob: %s", ddph_error_message(e));
    ddph_error_free(e);
    ddph_session_close(sgd);
    ddph_session_close(adam);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// The codec alone: round trip, truncation at every byte, trailing bytes.
TEST(State, CodecRoundTripsAndRejectsTruncation) {
  const core_optim::ParamKey k01 = core_optim::ParamKey::position(0, 1),
                             k20 = core_optim::ParamKey::position(2, 0);
  const core_optim::ParamKey id7 = core_optim::ParamKey::id(7), id0 = core_optim::ParamKey::id(0);
  core_optim::StateMap m;
  m[k01].step = 3;
  m[k01].momentum = {1.5f, -2.f};
  m[k20].step = 7;
  m[k20].momentum = {0.25f};
  m[k20].second = {4.f};
  m[k20].max_second = {5.f};
  m[id7].step = 2;
  m[id7].second = {9.f, 8.f};
  m[id0].step = 1;
  const std::string good = core_optim::encode_state(m, core_optim::OptimKind::kAdamW);
  const core_optim::StateMap back =
      core_optim::decode_state(good.data(), good.size(), core_optim::OptimKind::kAdamW);
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(back.at(id7).second, m[id7].second);
  EXPECT_EQ(back.at(id0).step, 1u);
  EXPECT_EQ(back.count(core_optim::ParamKey::position(7, 0)), 0u);  // an id is not a bucket index
  EXPECT_EQ(back.at(k01).momentum, m[k01].momentum);
  EXPECT_EQ(back.at(k20).max_second, m[k20].max_second);
  EXPECT_EQ(back.at(k20).step, 7u);
  auto code_of = [](const std::string& b, core_optim::OptimKind k) {
    try {
      core_optim::decode_state(b.data(), b.size(), k);
      return ddph_code_t(DDPH_OK);
    } catch (const ddph::Error& e) {
      return e.code();
    }
  };
  for (size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_EQ(code_of(good.substr(0, cut), core_optim::OptimKind::kAdamW), DDPH_INVALID_ARGUMENT)
        << cut;
  EXPECT_EQ(code_of(good + "x", core_optim::OptimKind::kAdamW), DDPH_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(good, core_optim::OptimKind::kAdam), DDPH_INVALID_ARGUMENT);
}

// A checkpoint of the first format (version 1: positions only, no key
// kind), written byte by byte as that version's encoder wrote it, loads.
TEST(State, Version1BlobsStillLoad) {
  ddph::LeWriter w;
  const char magic[8] = {'D', 'D', 'P', 'H', 'O', 'P', 'T', 'M'};
  ddph::put_frame_header(w, magic, 1);
  w.put(uint32_t(core_optim::OptimKind::kSgd), 4);
  w.put(1, 4);  // one parameter
  w.put(3, 8);  // bucket 3
  w.put(1, 4);  // position 1
  w.put(5, 8);  // step 5
  w.put_floats({0.5f, -1.f});
  w.put_floats({});
  w.put_floats({});
  const std::string v1 = ddph::finish_frame(w);
  const core_optim::StateMap back =
      core_optim::decode_state(v1.data(), v1.size(), core_optim::OptimKind::kSgd);
  ASSERT_EQ(back.size(), 1u);
  const core_optim::ParamState& s = back.at(core_optim::ParamKey::position(3, 1));
  EXPECT_EQ(s.step, 5u);
  EXPECT_EQ(s.momentum, (std::vector<float>{0.5f, -1.f}));
}

// DDP regroups parameters into new buckets after the first step. With the
// host's parameter ids (ABI 1.2) each parameter's Adam state follows it into
// its new bucket: the run that regroups ends with the same bits as the run
// that never does. Without ids the state stays with the positions and the
// regrouped run cannot match (here it even fails: a state of one size meets
// a parameter of another).
TEST(ParamIds, StateFollowsEachParameterWhenTheHostRegroupsItsBuckets) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::string y = yaml("optimizer: adam, lr: 0.01, amsgrad: true");
    auto run = [&](bool ids, bool regroup, std::vector<float>* out) {
      ddph_session_t* s = ddph_test::open_session(y, rank, world, dir);
      if (s == nullptr) return DDPH_INTERNAL;
      Model m;
      m.with_ids = ids;
      ddph_code_t code = DDPH_OK;
      for (int step = 0; step < 6 && code == DDPH_OK; ++step) {
        if (regroup && step == 3) m.regroup({{3, 1}, {0, 2}});  // every parameter moves
        std::string message;
        code = m.step(s, rank, uint64_t(step), &message);
      }
      *out = m.flat();
      ddph_session_close(s);
      return code;
    };
    std::vector<float> fixed, regrouped, by_position;
    DDPH_CHILD_CHECK(run(true, false, &fixed) == DDPH_OK, "ids, fixed layout");
    DDPH_CHILD_CHECK(run(true, true, &regrouped) == DDPH_OK, "ids, regrouped");
    DDPH_CHILD_CHECK(std::memcmp(fixed.data(), regrouped.data(), total_numel() * 4) == 0,
                     "with ids the regrouped run differs from the fixed one");
    const ddph_code_t positions = run(false, true, &by_position);
    DDPH_CHILD_CHECK(positions != DDPH_OK ||
                         std::memcmp(fixed.data(), by_position.data(), total_numel() * 4) != 0,
                     "without ids a regrouped run matched: the test cannot tell ids apart");
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// With ids, `params` names ids; buckets with and without ids do not mix.
TEST(ParamIds, SelectionNamesIdsAndBucketsMustAllHaveThem) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(yaml("optimizer: sgd, lr: 0.1, params: \"3\""), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    Model m;
    m.with_ids = true;
    m.regroup({{3, 1}, {0, 2}});  // id 3 sits at position 0 of bucket 0
    const std::vector<float> before = m.flat();
    DDPH_CHILD_CHECK(m.step(s, rank, 0) == DDPH_OK, "step");
    const std::vector<float> after = m.flat();
    size_t at = 0;
    for (int p = 0; p < kParams; ++p) {
      const bool changed = std::memcmp(before.data() + at, after.data() + at, numel(p) * 4) != 0;
      DDPH_CHILD_CHECK(changed == (p == 3), "parameter %d %s", p,
                       changed ? "changed" : "did not change");
      at += numel(p);
    }
    m.with_ids = false;
    std::string message;
    DDPH_CHILD_CHECK(m.step(s, rank, 1, &message) == DDPH_INVALID_ARGUMENT &&
                         message.find("has no parameter ids") != std::string::npos,
                     "mixed ids: %s", message.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(Create, AWrappedHookWhoseResultLandsElsewhereIsRefused) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    const std::string msg =
        open_error(yaml("optimizer: sgd", "{family: mixed_precision, name: allreduce_upcast}"),
                   rank, world, dir);
    DDPH_CHILD_CHECK(msg.find("allreduce_upcast") != std::string::npos &&
                         msg.find("RESULT_ELSEWHERE") != std::string::npos,
                     "message: %s", msg.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(Create, BadOptionsAreRefusedNamingTheOption) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    const std::pair<const char*, const char*> cases[] = {
        {"optimizer: sgd, nesterov: true", "nesterov"},
        {"optimizer: sgd, momentum: 0.9, dampening: 0.5, nesterov: true", "dampening 0"},
        {"optimizer: adam, beta1: 1.0", "beta1"},
        {"optimizer: adam, beta2: 1.5", "beta2"},
        {"optimizer: rmsprop", "optimizer"},
        {"lr: -0.1", "lr"},
        {"eps: -1", "eps"},
        {"params: \"0,x\"", "params"},
        {"params: \"3-1\"", "params"},
        {"momentum: 0.9, betas: 0.5", "betas"},
    };
    for (const auto& c : cases) {
      const std::string msg = open_error(yaml(c.first), rank, world, dir);
      DDPH_CHILD_CHECK(msg.find(c.second) != std::string::npos, "options {%s}: message: %s",
                       c.first, msg.c_str());
    }
    // No wrap: it is a wrapper.
    const std::string msg = open_error(
        "comm: {backend: gloo}\nhook: {family: optimizer_overlap, name: hook_then_optimizer}\n",
        rank, world, dir);
    DDPH_CHILD_CHECK(msg.find("wrap") != std::string::npos, "no wrap: %s", msg.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A bad param_groups is refused when the session opens, with
// DDPH_INVALID_ARGUMENT naming the option and the piece at fault.
TEST(Create, BadParamGroupsAreRefusedNamingTheOptionAndThePiece) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    const std::pair<const char*, const char*> cases[] = {
        {"param_groups: \"1,3: weight_decay=0; 3-4: lr=0.1\"",
         "parameter 3 is in group \"1,3: weight_decay=0\" and in group \"3-4: lr=0.1\""},
        {"param_groups: \"1: wd=0\"", "unknown key 'wd'"},
        {"param_groups: \"1: lr=abc\"", "lr='abc' is not a finite number"},
        {"param_groups: \"1: lr=inf\"", "lr='inf' is not a finite number"},
        {"optimizer: adam, param_groups: \"1: amsgrad=yes\"", "amsgrad='yes' is not true or false"},
        {"param_groups: \"1 lr=0.1\"", "group \"1 lr=0.1\" has no ':'"},
        {"param_groups: \"1: lr\"", "'lr' is not key=value"},
        {"param_groups: \"1:\"", "overrides no option"},
        {"param_groups: \": lr=0.1\"", "names no parameter"},
        {"param_groups: \"x: lr=0.1\"", "'x' in \"x\" is not a parameter index"},
        {"param_groups: \"5-2: lr=0.1\"", "range '5-2'"},
        {"param_groups: \"1: lr=0.1, lr=0.2\"", "sets 'lr' twice"},
        {"param_groups: \"1: optimizer=adam\"", "one per hook"},
        {"optimizer: adam, param_groups: \"1: momentum=0.9\"", "key 'momentum' is sgd's"},
        {"optimizer: sgd, param_groups: \"1: beta1=0.5\"", "key 'beta1' is adam/adamw's"},
        {"optimizer: adam, param_groups: \"1: beta1=1\"", "'beta1' is 1; it must be in [0, 1)"},
        {"param_groups: \"1: lr=-0.5\"", "'lr' is -0.5; it must be >= 0"},
        {"param_groups: \"0: nesterov=true\"", "'nesterov' needs optimizer sgd with momentum > 0"},
        {"optimizer: sgd, momentum: 0.9, nesterov: true, param_groups: \"0: momentum=0\"",
         "'nesterov' needs optimizer sgd with momentum > 0"},
        {"params: \"0-2\", param_groups: \"2-3: lr=0.1\"",
         "names parameter 3, which option 'params' leaves out"},
    };
    for (const auto& c : cases) {
      const ddph_test::OpenOutcome o = ddph_test::open_outcome(yaml(c.first), rank, world, dir);
      DDPH_CHILD_CHECK(o.code == DDPH_INVALID_ARGUMENT, "options {%s}: code %d, message: %s",
                       c.first, int(o.code), o.message.c_str());
      DDPH_CHILD_CHECK(o.message.find("option 'param_groups'") != std::string::npos &&
                           o.message.find(c.second) != std::string::npos,
                       "options {%s}: wanted \"%s\" in: %s", c.first, c.second, o.message.c_str());
    }
    // What is well-formed opens: a trailing ';', spaces, exponents.
    const ddph_test::OpenOutcome ok = ddph_test::open_outcome(
        yaml("optimizer: adam, param_groups: \" 0 , 2-3 : lr = 1e-3 , amsgrad = true ; 1: "
             "eps=0;\""),
        rank, world, dir);
    DDPH_CHILD_CHECK(ok.code == DDPH_OK, "well-formed groups refused: %s", ok.message.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Groups name parameters as `params` does: ids when the host gives them
// (here id 3 sits at position 0 of bucket 0, so a position would pick
// another parameter), positions otherwise; a group index past the last
// parameter is refused at the step's last bucket. With lr=0 SGD leaves a
// parameter exactly as it was: p + (-0) * d.
TEST(ParamIds, GroupsNameIdsOrPositionsAndIndicesPastTheLastAreRefused) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    const std::string y = yaml("optimizer: sgd, lr: 0.1, param_groups: \"3: lr=0\"");
    for (const bool ids : {true, false}) {
      ddph_session_t* s = ddph_test::open_session(y, rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open");
      Model m;
      m.with_ids = ids;
      m.regroup({{3, 1}, {0, 2}});
      const std::vector<float> before = m.flat();
      DDPH_CHILD_CHECK(m.step(s, rank, 0) == DDPH_OK, "step");
      const std::vector<float> after = m.flat();
      // By position, index 3 is bucket 1's second parameter: model parameter 2.
      const int frozen = ids ? 3 : 2;
      size_t at = 0;
      for (int p = 0; p < kParams; ++p) {
        const bool changed = std::memcmp(before.data() + at, after.data() + at, numel(p) * 4) != 0;
        DDPH_CHILD_CHECK(changed == (p != frozen), "%s: parameter %d %s", ids ? "ids" : "positions",
                         p, changed ? "changed" : "did not change");
        at += numel(p);
      }
      ddph_session_close(s);
    }
    ddph_session_t* typo = ddph_test::open_session(
        yaml("optimizer: sgd, param_groups: \"1: lr=0; 7: lr=0.5\""), rank, world, dir);
    DDPH_CHILD_CHECK(typo != nullptr, "open typo");
    Model m;
    std::string msg;
    DDPH_CHILD_CHECK(m.step(typo, rank, 0, &msg) == DDPH_INVALID_ARGUMENT &&
                         msg.find("option 'param_groups' names parameter 7") != std::string::npos &&
                         msg.find("hold 4 parameters") != std::string::npos,
                     "index 7: %s", msg.c_str());
    ddph_session_close(typo);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A bfloat16 bucket steps float32 parameters on its upcast gradients: on
// one rank (allreduce is the identity), 10 Adam steps on bf16 gradients
// give the same bits as on float32 buckets holding the same values.
TEST(Run, Bfloat16GradientsStepFloat32ParametersLikeTheirFloat32Values) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    const std::string y = yaml("optimizer: adam, lr: 0.01, weight_decay: 0.01");
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    ddph_session_t* b = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a && b, "open");
    Model low(GradMode::kBF16), ref(GradMode::kBF16Values);
    for (int step = 0; step < 10; ++step) {
      DDPH_CHILD_CHECK(low.step(a, rank, uint64_t(step)) == DDPH_OK, "bf16 step %d", step);
      DDPH_CHILD_CHECK(ref.step(b, rank, uint64_t(step)) == DDPH_OK, "f32 step %d", step);
    }
    DDPH_CHILD_CHECK(std::memcmp(low.flat().data(), ref.flat().data(), total_numel() * 4) == 0,
                     "bf16 and f32 runs differ");
    DDPH_CHILD_CHECK(low.flat() != Model().flat(), "parameters did not move");
    ddph_session_close(b);
    ddph_session_close(a);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A host that does not share a selected parameter gets an error naming the
// field, before anything is sent; an unselected one may stay unshared.
TEST(Run, UnsharedParametersAreErrorsUnlessUnselected) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* all =
        ddph_test::open_session(yaml("optimizer: sgd, lr: 0.1"), rank, world, dir);
    ddph_session_t* some =
        ddph_test::open_session(yaml("optimizer: sgd, lr: 0.1, params: \"0-2\""), rank, world, dir);
    DDPH_CHILD_CHECK(all && some, "open");
    Model m;
    m.hide(3);
    std::string msg;
    DDPH_CHILD_CHECK(m.step(all, rank, 0, &msg) == DDPH_INVALID_ARGUMENT, "accepted");
    DDPH_CHILD_CHECK(msg.find("params[1].data.data is NULL") != std::string::npos, "message: %s",
                     msg.c_str());
    const std::vector<float> before = m.flat();
    DDPH_CHILD_CHECK(m.step(some, rank, 0, &msg) == DDPH_OK, "subset: %s", msg.c_str());
    const std::vector<float> after = m.flat();
    const size_t last = total_numel() - numel(3);
    DDPH_CHILD_CHECK(std::memcmp(before.data() + last, after.data() + last, numel(3) * 4) == 0,
                     "parameter 3 changed");
    DDPH_CHILD_CHECK(before[0] != after[0], "parameter 0 did not move");
    // An index past the 4 parameters is refused at the step's last bucket.
    ddph_session_t* typo =
        ddph_test::open_session(yaml("optimizer: sgd, params: \"0,9\""), rank, world, dir);
    DDPH_CHILD_CHECK(typo != nullptr, "open typo");
    Model shared;
    DDPH_CHILD_CHECK(shared.step(typo, rank, 0, &msg) == DDPH_INVALID_ARGUMENT &&
                         msg.find("names parameter 9") != std::string::npos &&
                         msg.find("hold 4 parameters") != std::string::npos,
                     "index 9: %s", msg.c_str());
    ddph_session_close(typo);
    ddph_session_close(some);
    ddph_session_close(all);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Two parameters under one id would share one optimizer state (SGD with
// momentum then steps each with the other's buffer). Refused by id, on
// every rank: in one bucket before it is reduced (with different sizes,
// naming the id, not a checkpoint), across buckets at the later one.
TEST(ParamIds, TwoParametersUnderOneIdAreRefusedNamingTheId) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(yaml("optimizer: sgd, lr: 0.1, momentum: 0.9"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    Model same_bucket;  // parameters 0 (12 elements) and 1 (5) in bucket 0
    same_bucket.with_ids = true;
    same_bucket.id_of[1] = 0;
    const std::vector<float> before = same_bucket.flat();
    std::string msg;
    DDPH_CHILD_CHECK(
        same_bucket.step(s, rank, 0, &msg) == DDPH_INVALID_ARGUMENT &&
            msg.find("bucket 0 holds parameter id 0 twice (params[0] and params[1])") !=
                std::string::npos &&
            msg.find("checkpoint") == std::string::npos,
        "one bucket: %s", msg.c_str());
    const size_t bucket1 = numel(0) + numel(1);
    DDPH_CHILD_CHECK(std::memcmp(before.data(), same_bucket.flat().data(), bucket1 * 4) == 0,
                     "bucket 0 moved");
    Model two_buckets;  // parameters 0 and 2 (12 elements each) in buckets 0 and 1
    two_buckets.with_ids = true;
    two_buckets.id_of[2] = 0;
    DDPH_CHILD_CHECK(two_buckets.step(s, rank, 1, &msg) == DDPH_INVALID_ARGUMENT &&
                         msg.find("parameter id 0 is in bucket 0 and in bucket 1 of step 1") !=
                             std::string::npos,
                     "two buckets: %s", msg.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

}  // namespace
