// Core's option parsing, as the loader relies on it.
#include <gtest/gtest.h>

#include <functional>

#include "core/base/error.h"
#include "core/base/options.h"
#include "loader/host_table.h"

namespace {

const ddph_option_spec_t kSpecs[] = {
    ddph::spec_int("rank", "2", "an int", 1, 8),
    ddph::spec_float("lr", "0.1", "a float"),
    ddph::spec_bool("warm", "true", "a bool"),
    ddph::spec_string("mode", "a", "a string", "a|b"),
    ddph::spec_int("needed", nullptr, "required"),
};

std::string message_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(Options, DefaultsFilledInSchemaOrder) {
  auto list = ddph::resolve_options(kSpecs, 5, {{"needed", "7"}, {"lr", "0.5"}});
  ASSERT_EQ(list.size(), 5u);
  ddph::Options opts(list.data(), list.size());
  EXPECT_EQ(opts.get_int("rank"), 2);
  EXPECT_DOUBLE_EQ(opts.get_float("lr"), 0.5);
  EXPECT_TRUE(opts.get_bool("warm"));
  EXPECT_EQ(opts.get_string("mode"), "a");
  EXPECT_EQ(opts.get_int("needed"), 7);
}

TEST(Options, RejectsBadValues) {
  EXPECT_NE(message_of([] { ddph::resolve_options(kSpecs, 5, {{"needed", "x"}}); })
                .find("expects an int, got 'x'"),
            std::string::npos);
  EXPECT_NE(message_of([] { ddph::resolve_options(kSpecs, 5, {{"needed", "1"}, {"rank", "9"}}); })
                .find("outside its range [1, 8]"),
            std::string::npos);
  EXPECT_NE(message_of([] { ddph::resolve_options(kSpecs, 5, {{"needed", "1"}, {"mode", "c"}}); })
                .find("expected one of a|b"),
            std::string::npos);
  EXPECT_NE(message_of([] { ddph::resolve_options(kSpecs, 5, {{"needed", "1"}, {"warm", "2"}}); })
                .find("expects a bool"),
            std::string::npos);
  EXPECT_NE(message_of([] { ddph::resolve_options(kSpecs, 5, {}); }).find("'needed' is required"),
            std::string::npos);
  EXPECT_NE(message_of([] { ddph::resolve_options(kSpecs, 5, {{"needed", "1"}, {"x", "1"}}); })
                .find("unknown option 'x' (known: rank, lr, warm, mode, needed)"),
            std::string::npos);
}

// An int with choices accepts only the listed values.
TEST(Options, IntChoicesAreEnforced) {
  const ddph_option_spec_t bits[] = {ddph::spec_int("bits", "8", "code width", 2, 8, "8|4|2")};
  EXPECT_NE(message_of([&] { ddph::resolve_options(bits, 1, {{"bits", "3"}}); })
                .find("option 'bits' is 3; expected one of 8|4|2"),
            std::string::npos);
  ddph::OptionList ok = ddph::resolve_options(bits, 1, {{"bits", "4"}});
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok.data()[0].value.i, 4);
  EXPECT_EQ(ddph::resolve_options(bits, 1, {}).data()[0].value.i, 8);
}
