#include <gtest/gtest.h>

#include "core/error.h"
#include "loader/host_table.h"
#include "loader/state_blob.h"

using ddph::loader::decode_state;
using ddph::loader::encode_state;
using ddph::loader::StateRecord;

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

TEST(StateBlob, RejectsCorruption) {
  std::string blob = encode_state({{"f", "h", "state"}});
  auto expect_reject = [](const std::string& b, const char* what) {
    try {
      decode_state(b.data(), b.size());
      ADD_FAILURE() << "accepted a corrupt blob, expected: " << what;
    } catch (const ddph::Error& e) {
      EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  std::string bad_magic = blob;
  bad_magic[0] = 'X';
  expect_reject(bad_magic, "magic");
  std::string bad_version = blob;
  bad_version[8] = 7;
  expect_reject(bad_version, "format version 7");
  expect_reject(blob.substr(0, blob.size() - 1), "truncated");
  expect_reject(blob + "x", "unexpected bytes");
}
