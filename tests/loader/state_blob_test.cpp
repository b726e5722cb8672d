#include "loader/session/state_blob.h"

#include <gtest/gtest.h>

#include "core/base/error.h"
#include "loader/host_table.h"
#include "tests/support/checkpoint_layout.h"

using ddph::loader::decode_state;
using ddph::loader::encode_state;
using ddph::loader::StateRecord;
namespace layout = ddph_test::layout;

namespace {

// The error decode_state throws for b, or "" when it accepts it.
std::string refusal(const std::string& b) {
  try {
    decode_state(b.data(), b.size());
    return "";
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
}

}  // namespace

TEST(StateBlob, RoundTrip) {
  std::vector<StateRecord> in = {{"default", "allreduce", std::string("\0\1\2", 3)},
                                 {"powersgd", "powersgd", ""}};
  std::string blob = encode_state(in);
  EXPECT_EQ(blob.compare(0, 8, "DDPHSTAT"), 0);
  auto out = decode_state(blob.data(), blob.size());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].family, "default");
  EXPECT_EQ(out[0].hook, "allreduce");
  EXPECT_EQ(out[0].blob, std::string("\0\1\2", 3));
  EXPECT_EQ(out[1].blob, "");
}

// The container is the documented layout, byte for byte: the independent
// writer of tests/support/checkpoint_layout.h makes the same bytes.
TEST(StateBlob, MatchesTheDocumentedLayout) {
  const std::string a = encode_state({{"quantization", "per_channel", "xyz"}, {"f", "h", ""}});
  EXPECT_EQ(a, layout::container({{"quantization", "per_channel", "xyz"}, {"f", "h", ""}}));
}

TEST(StateBlob, RejectsCorruption) {
  std::string blob = encode_state({{"f", "h", "state"}});
  auto expect_reject = [](const std::string& b, const char* what) {
    const std::string message = refusal(b);
    EXPECT_NE(message.find(what), std::string::npos) << "'" << message << "' lacks " << what;
  };
  std::string bad_magic = blob;
  bad_magic[0] = 'X';
  expect_reject(bad_magic, "magic");
  std::string bad_version = blob;
  bad_version[8] = 7;
  expect_reject(bad_version, "version 7, but this build reads version 2");
  expect_reject(blob.substr(0, blob.size() - 1), "truncated");
  expect_reject(blob + "x", "checksum mismatch");
}

// Every single-byte change anywhere (the record count, a family, a hook name,
// a length, a hook's blob, the checksum) is refused: never read as another
// hook, another length or other state.
TEST(StateBlob, EveryByteFlipIsRefused) {
  const std::string blob =
      encode_state({{"quantization", "per_channel", std::string(40, '\x11')},
                    {"post_localsgd", "model_averaging", std::string("\0\1\2\3", 4)}});
  layout::for_each_byte_change(
      blob, {0x01, 0x80, 0xff}, [](const std::string& bad, size_t at, uint8_t mask) {
        EXPECT_NE(refusal(bad), "") << "byte " << at << " ^ " << int(mask) << " was accepted";
      });
}

// A record header that the checksum covers but the length fields break is
// still refused by the structure checks (a container made with a valid
// checksum around a bad length).
TEST(StateBlob, ValidChecksumAroundABadLengthIsRefused) {
  // One record whose family claims 200 bytes; 1 follows.
  const std::string body("\1\0\0\0\xc8\0\0\0f", 9);
  EXPECT_NE(refusal(layout::frame("DDPHSTAT", 2, body)).find("truncated"), std::string::npos);
}

// Version 1 (no checksum) is refused naming both versions.
TEST(StateBlob, VersionOneIsRefusedNamingBothVersions) {
  std::string v1("DDPHSTAT\1\0\0\0\0\0\0\0", 16);  // version 1, no records
  const std::string message = refusal(v1);
  EXPECT_NE(message.find("version 1, but this build reads version 2"), std::string::npos)
      << message;
}
