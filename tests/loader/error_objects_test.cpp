#include <gtest/gtest.h>

#include "core/base/error.h"
#include "loader/host_table.h"

TEST(ErrorObjects, NullIsSuccess) {
  EXPECT_EQ(ddph_error_code(nullptr), DDPH_OK);
  EXPECT_STREQ(ddph_error_message(nullptr), "");
  ddph_error_free(nullptr);  // no-op
}

TEST(ErrorObjects, HostTableMakesAndReadsErrors) {
  const ddph_host_t* host = ddph_host();
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->struct_size, sizeof(ddph_host_t));
  EXPECT_EQ(host->abi_major, 1u);
  ddph_error_t* e = host->error_new(DDPH_TIMEOUT, "peer 3 is late");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_TIMEOUT);
  EXPECT_STREQ(ddph_error_message(e), "peer 3 is late");
  EXPECT_EQ(host->error_code(e), DDPH_TIMEOUT);
  EXPECT_STREQ(host->error_message(e), "peer 3 is late");
  host->error_free(e);
}

TEST(ErrorObjects, OkCodeBecomesInternalAndNullMessageIsEmpty) {
  ddph_error_t* e = ddph_host()->error_new(DDPH_OK, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INTERNAL);
  EXPECT_STREQ(ddph_error_message(e), "");
  ddph_error_free(e);
}

TEST(ErrorObjects, GuardTurnsExceptionsIntoErrors) {
  ddph::loader::install_loader_host();
  ddph_error_t* e = ddph::guard([] { DDPH_FAIL(DDPH_NOT_FOUND, "no such thing " << 42); });
  EXPECT_EQ(ddph_error_code(e), DDPH_NOT_FOUND);
  EXPECT_STREQ(ddph_error_message(e), "no such thing 42");
  ddph_error_free(e);
  EXPECT_EQ(ddph::guard([] {}), nullptr);
}

TEST(ErrorObjects, VersionText) {
  EXPECT_STREQ(ddph_version(), "1.10");
}
