// The quantization checkpoint's integrity: every single-byte change of a
// saved blob is refused, a non-finite residual or an out-of-order index is
// refused even under a valid checksum (blobs the test builds with core's
// frame writer), the older format without a checksum is refused naming both
// versions, and a good blob still resumes the run bit for bit on 2 Gloo ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/base/error.h"
#include "core/base/le_bytes.h"
#include "plugins/quantization/residuals.h"
#include "tests/quantization/hooks_ranks.h"
#include "tests/support/checkpoint_layout.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::quant;
namespace q = ddph::quantization;
namespace layout = ddph_test::layout;

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'Q', 'R', 'E', 'S'};

// decode_residuals' error for b, or "" when it accepts it.
std::string refusal(const std::string& b) {
  try {
    q::decode_residuals(b.data(), b.size());
    return "";
  } catch (const ddph::Error& e) {
    if (e.code() != DDPH_INVALID_ARGUMENT) return "wrong code: " + std::string(e.what());
    return e.what();
  }
}

struct Bucket {
  uint64_t index;
  std::vector<float> own, owner;
};

// A residual blob by the documented layout, framed by core's writer: any
// content, with a valid checksum.
std::string framed(const std::vector<Bucket>& buckets) {
  ddph::LeWriter w;
  ddph::put_frame_header(w, kMagic, 2);
  w.put(buckets.size(), 4);
  for (const Bucket& b : buckets) {
    w.put(b.index, 8);
    w.put_floats(b.own);
    w.put_floats(b.owner);
  }
  return ddph::finish_frame(w);
}

const std::vector<Bucket> kSample = {{3, {1.5f, -2.0f, 0.25f}, {0.5f}}, {9, {7.0f, -1e-30f}, {}}};

TEST(QuantState, SavedBlobIsTheDocumentedLayout) {
  q::ResidualMap m;
  for (const Bucket& b : kSample) m[b.index] = q::BucketResidual{b.own, b.owner};
  const std::string saved = q::encode_residuals(m);
  std::string body("\2\0\0\0", 4);  // bucket count, then each bucket by hand
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) body.push_back(char(uint8_t(v >> (8 * i))));
  };
  for (const Bucket& b : kSample) {
    put(b.index, 8);
    for (const auto* v : {&b.own, &b.owner}) {
      put(v->size(), 8);
      for (float f : *v) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        put(bits, 4);
      }
    }
  }
  EXPECT_EQ(saved, layout::frame("DDPHQRES", 2, body));
  const q::ResidualMap back = q::decode_residuals(saved.data(), saved.size());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at(3).own, kSample[0].own);
  EXPECT_EQ(back.at(3).owner, kSample[0].owner);
  EXPECT_EQ(back.at(9).own, kSample[1].own);
}

TEST(QuantState, EveryByteFlipIsRefused) {
  const std::string good = framed(kSample);
  ASSERT_EQ(refusal(good), "");
  layout::for_each_byte_change(
      good, {0x01, 0x80, 0xff}, [](const std::string& bad, size_t at, uint8_t mask) {
        EXPECT_NE(refusal(bad), "") << "byte " << at << " ^ " << int(mask) << " was accepted";
      });
}

// Under a valid checksum: the message names the family, the bucket, the
// residual and the element.
TEST(QuantState, NonFiniteResidualIsRefusedNamingBucketAndElement) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<Bucket> buckets;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{{3, {1.0f}, {}}, {9, {7.0f, nan}, {}}}, "bucket 9, own residual element 1 is NaN"},
      {{{3, {1.0f, 2.0f}, {0.0f, inf}}}, "bucket 3, owner residual element 1 is +Inf"},
      {{{0, {-inf}, {}}}, "bucket 0, own residual element 0 is -Inf"},
  };
  for (const Case& c : cases) {
    const std::string message = refusal(framed(c.buckets));
    EXPECT_NE(message.find("quantization state"), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message << " lacks " << c.says;
  }
}

TEST(QuantState, IndicesOutOfOrderOrRepeatedAreRefused) {
  EXPECT_NE(refusal(framed({{9, {1.0f}, {}}, {3, {1.0f}, {}}})).find("index 3 follows 9"),
            std::string::npos);
  EXPECT_NE(refusal(framed({{4, {1.0f}, {}}, {4, {2.0f}, {}}})).find("index 4 follows 4"),
            std::string::npos);
}

// The version 1 layout (no checksum) of ddphooks before this format.
TEST(QuantState, VersionOneIsRefusedNamingBothVersions) {
  std::string v1(kMagic, 8);
  v1 += std::string("\1\0\0\0\1\0\0\0", 8);                         // version 1, one bucket
  v1 += std::string(8, '\0') + std::string("\1\0\0\0\0\0\0\0", 8);  // index 0, 1 float
  v1 += std::string(4, '\0') + std::string(8, '\0');                // 0.0f, no owner
  const std::string message = refusal(v1);
  EXPECT_NE(message.find("quantization state: version 1, but this build reads version 2"),
            std::string::npos)
      << message;
}

// The session blob of `hook_blob` alone, by the independent container writer.
std::string rewrapped(const std::string& hook, const std::string& hook_blob) {
  return layout::container({{"quantization", hook, hook_blob}});
}

// Two ranks save after 3 steps of two buckets. A second session loads the
// blob, then is offered every single-byte change of the session blob and of
// the hook's blob (in a valid container), and a NaN residual under a valid
// checksum: all refused with DDPH_INVALID_ARGUMENT. Its step 3 then equals
// the original session's step 3 bit for bit: the good blob resumed the run,
// and nothing refused changed the state.
TEST(QuantStateSession, CorruptBlobsAreRefusedAndAGoodOneResumesTheRun) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::string hook = "per_channel";
    const std::string y =
        yaml(hook, "protocol: reduce_scatter, bits: 4, channel_size: 64, error_feedback: true");
    constexpr size_t kN = 300;
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a != nullptr, "open a");
    for (uint64_t step = 0; step < 3; ++step)
      for (uint64_t index = 0; index < 2; ++index) {
        std::vector<float> x = inputs(rank + int(index), step, kN);
        DDPH_CHILD_CHECK(run_bucket_msg(a, x, index, step, nullptr) == DDPH_OK, "a step");
      }
    const std::string blob = session_state(a);
    const std::string hook_state = hook_blob(blob);
    std::string why;
    DDPH_CHILD_CHECK(layout::valid_session_state(blob, &why), "saved blob: %s", why.c_str());
    std::vector<float> xa = inputs(rank, 3, kN), xb = xa;
    DDPH_CHILD_CHECK(run_bucket_msg(a, xa, 0, 3, nullptr) == DDPH_OK, "a step 3");
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

    // Bucket 0's own residual, element 5, made NaN; the checksum made anew.
    std::string body = hook_state.substr(12, hook_state.size() - 20);
    const size_t element5 = 4 + 8 + 8 + 5 * 4;
    body.replace(element5, 4, std::string("\0\0\xc0\x7f", 4));  // a quiet NaN's bits, LE
    ddph::LeWriter w;
    ddph::put_frame_header(w, kMagic, 2);
    w.put_bytes(body.data(), body.size());
    const std::string nan_state = ddph::finish_frame(w);
    DDPH_CHILD_CHECK(
        ddph_test::load_state(b, rewrapped(hook, nan_state), &message) == DDPH_INVALID_ARGUMENT,
        "a NaN residual was accepted");
    DDPH_CHILD_CHECK(message.find("bucket 0, own residual element 5 is NaN") != std::string::npos,
                     "message: %s", message.c_str());

    DDPH_CHILD_CHECK(run_bucket_msg(b, xb, 0, 3, nullptr) == DDPH_OK, "b step 3");
    DDPH_CHILD_CHECK(std::memcmp(xa.data(), xb.data(), kN * 4) == 0,
                     "the resumed run differs from the uninterrupted one");
    ddph_session_close(b);
    // Without the blob step 3 differs: the state the blob carries matters.
    ddph_session_t* c = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(c != nullptr, "open c");
    std::vector<float> xc = inputs(rank, 3, kN);
    DDPH_CHILD_CHECK(run_bucket_msg(c, xc, 0, 3, nullptr) == DDPH_OK, "c step 3");
    DDPH_CHILD_CHECK(std::memcmp(xa.data(), xc.data(), kN * 4) != 0,
                     "a run without the blob gives the same step 3");
    ddph_session_close(c);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

}  // namespace
