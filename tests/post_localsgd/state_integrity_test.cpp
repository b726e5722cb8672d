// The step counters' checkpoint integrity (post_localsgd and
// model_averaging share one format): every single-byte change of a saved
// blob is refused, a step above 2^53 is refused under a valid checksum (a
// blob the test builds with core's frame writer), the older format without a
// checksum is refused naming both versions, and a good blob still resumes a
// run of both hooks bit for bit on 2 Gloo ranks.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "conformance/lent_bucket.h"
#include "core/base/error.h"
#include "core/base/le_bytes.h"
#include "plugins/post_localsgd/step_counter.h"
#include "tests/support/checkpoint_layout.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

namespace pl = ddph::post_localsgd;
namespace layout = ddph_test::layout;

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'L', 'S', 'G', 'D'};
constexpr const char* kAveraging = "post_localsgd/model_averaging";

// decode_step's error for b, or "" when it accepts it.
std::string refusal(const std::string& b) {
  try {
    pl::decode_step(b.data(), b.size(), kAveraging);
    return "";
  } catch (const ddph::Error& e) {
    if (e.code() != DDPH_INVALID_ARGUMENT) return "wrong code: " + std::string(e.what());
    return e.what();
  }
}

std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(char(uint8_t(v >> (8 * i))));
  return s;
}

// A step blob with any step and a valid checksum, by core's frame writer.
std::string framed(uint64_t step) {
  ddph::LeWriter w;
  ddph::put_frame_header(w, kMagic, 2);
  w.put(step, 8);
  return ddph::finish_frame(w);
}

TEST(LocalSgdState, SavedBlobIsTheDocumentedLayout) {
  EXPECT_EQ(pl::encode_step(0x0102030405ull), layout::frame("DDPHLSGD", 2, le64(0x0102030405ull)));
  const std::string top = pl::encode_step(uint64_t(1) << 53);
  EXPECT_EQ(pl::decode_step(top.data(), top.size(), kAveraging), uint64_t(1) << 53);
}

TEST(LocalSgdState, EveryByteFlipIsRefused) {
  const std::string good = pl::encode_step(12345);
  ASSERT_EQ(refusal(good), "");
  layout::for_each_byte_change(
      good, {0x01, 0x80, 0xff}, [](const std::string& bad, size_t at, uint8_t mask) {
        EXPECT_NE(refusal(bad), "") << "byte " << at << " ^ " << int(mask) << " was accepted";
      });
}

TEST(LocalSgdState, StepAboveTwoToThe53IsRefusedNamingHookAndField) {
  for (uint64_t step : {(uint64_t(1) << 53) + 1, ~uint64_t(0)}) {
    const std::string message = refusal(framed(step));
    const std::string says =
        std::string(kAveraging) + " state: step " + std::to_string(step) + " is out of range";
    EXPECT_NE(message.find(says), std::string::npos) << message;
  }
}

TEST(LocalSgdState, VersionOneIsRefusedNamingBothVersions) {
  const std::string v1 = std::string(kMagic, 8) + std::string("\1\0\0\0", 4) + le64(3);
  const std::string message = refusal(v1);
  EXPECT_NE(message.find("version 1, but this build reads version 2"), std::string::npos)
      << message;
}

// One step's bucket: kN rank-dependent gradients and one 2 x 3 parameter
// whose rank-dependent values the host lends (model_averaging averages them).
constexpr size_t kN = 6;
struct Step : ddph::plugin_checks::LentBucket {
  Step(int rank, uint64_t step) : LentBucket(int64_t(kN), 2, 3) {
    for (size_t i = 0; i < kN; ++i) {
      data[i] = float(4 * (10 * rank + int(i) + 3 * int(step)));
      param_data[i] = float(8 * (rank + 1) + int(i));
    }
    b.step = step;
  }
  bool same(const Step& o) const { return data == o.data && param_data == o.param_data; }
};

bool run(ddph_session_t* s, Step& st) {
  std::string message;
  const ddph_code_t code = ddph_test::run_bucket(s, st.b, &message);
  if (code != DDPH_OK) std::fprintf(stderr, "bucket: %s\n", message.c_str());
  return code == DDPH_OK;
}

// model_averaging (period 2) around post_localsgd (local from step 3), so
// the session blob holds both counters. After 3 steps: every single-byte
// change of the session blob, and of each hook's blob in a valid container,
// is refused; so is a counter above 2^53 under valid checksums, naming the
// hook. Then step 3 of the loaded session equals the original's (local
// gradients, no parameter average), where a fresh session's differs (world
// mean, parameters averaged).
TEST(LocalSgdStateSession, CorruptBlobsAreRefusedAndAGoodOneResumesTheRun) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::string y =
        "comm: {backend: gloo, timeout: 20s}\n"
        "hook: {family: post_localsgd, name: model_averaging, options: {period: 2}, "
        "wrap: {family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 3, "
        "subgroup_size: 1}}}\n";
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a != nullptr, "open a");
    for (uint64_t step = 0; step < 3; ++step) {
      Step st(rank, step);
      DDPH_CHILD_CHECK(run(a, st), "a, step %d", int(step));
    }
    const std::string blob = ddph_test::session_state(a);
    std::string why;
    DDPH_CHILD_CHECK(layout::valid_session_state(blob, &why), "saved blob: %s", why.c_str());
    std::vector<layout::Record> records;
    DDPH_CHILD_CHECK(layout::parse_container(blob, &records, &why) && records.size() == 2 &&
                         records[0].hook == "model_averaging",
                     "records: %s", why.c_str());
    Step sa(rank, 3);
    DDPH_CHILD_CHECK(run(a, sa), "a, step 3");
    ddph_session_close(a);

    ddph_session_t* b = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(b != nullptr, "open b");
    std::string message;
    DDPH_CHILD_CHECK(ddph_test::load_state(b, blob, &message) == DDPH_OK, "load: %s",
                     message.c_str());
    size_t offered = 0;
    const size_t accepted = ddph_test::accepted_byte_changes(b, blob, &offered);
    DDPH_CHILD_CHECK(accepted == 0, "%zu of %zu single-byte changes were not refused", accepted,
                     offered);
    for (size_t r = 0; r < records.size(); ++r) {
      std::vector<layout::Record> bad = records;
      bad[r].blob = framed((uint64_t(1) << 53) + 1);
      DDPH_CHILD_CHECK(
          ddph_test::load_state(b, layout::container(bad), &message) == DDPH_INVALID_ARGUMENT,
          "a step above 2^53 was accepted");
      const std::string says =
          "post_localsgd/" + records[r].hook + " state: step 9007199254740993 is out of range";
      DDPH_CHILD_CHECK(message.find(says) != std::string::npos, "message: %s", message.c_str());
    }

    Step sb(rank, 3);
    DDPH_CHILD_CHECK(run(b, sb), "b, step 3");
    DDPH_CHILD_CHECK(sb.same(sa), "the resumed run differs from the uninterrupted one");
    ddph_session_close(b);
    ddph_session_t* c = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(c != nullptr, "open c");
    Step sc(rank, 3);
    DDPH_CHILD_CHECK(run(c, sc), "c, step 3");
    DDPH_CHILD_CHECK(sc.data != sa.data && sc.param_data != sa.param_data,
                     "a session without the blob gives the same step 3");
    ddph_session_close(c);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
