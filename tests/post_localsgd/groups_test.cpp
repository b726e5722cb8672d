// Subgroups as colors (the smallest rank of each group), checked against
// groups written out by hand.
#include "core/hook/rank_groups.h"

#include <gtest/gtest.h>

#include "core/base/error.h"

namespace {

using ddph::groups_by_host;
using ddph::groups_from_list;
using ddph::groups_of_size;
using V = std::vector<int>;

std::string error_of(void (*fn)()) {
  try {
    fn();
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
    return e.what();
  }
  return "no error";
}

TEST(Groups, OfSizeAreConsecutiveRanks) {
  EXPECT_EQ(groups_of_size(6, 2, "h"), (V{0, 0, 2, 2, 4, 4}));
  EXPECT_EQ(groups_of_size(6, 3, "h"), (V{0, 0, 0, 3, 3, 3}));
  EXPECT_EQ(groups_of_size(4, 4, "h"), (V{0, 0, 0, 0}));
  EXPECT_EQ(groups_of_size(3, 1, "h"), (V{0, 1, 2}));
  EXPECT_NE(error_of([] {
              groups_of_size(4, 3, "h");
            }).find("h: a group size of 3 does not divide the world size 4"),
            std::string::npos);
}

TEST(Groups, FromListTakeAnyOrder) {
  EXPECT_EQ(groups_from_list("0,3;1,2", 4, "h"), (V{0, 1, 1, 0}));
  EXPECT_EQ(groups_from_list("3, 1;2;0", 4, "h"), (V{0, 1, 2, 1}));
  EXPECT_EQ(groups_from_list("0,1,2", 3, "h"), (V{0, 0, 0}));
}

TEST(Groups, FromListErrorsNameTheProblem) {
  auto has = [](void (*fn)(), const char* part) {
    const std::string e = error_of(fn);
    EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  has([] { groups_from_list("0,1;1,2", 3, "h"); }, "rank 1 is listed twice");
  has([] { groups_from_list("0,1", 3, "h"); }, "leaves out rank 2 (world size 3)");
  has([] { groups_from_list("0,4;1,2,3", 4, "h"); }, "rank 4 is outside [0, 4)");
  has([] { groups_from_list("0,x;1", 2, "h"); }, "'x' is not a rank");
  has([] { groups_from_list("0;;1", 2, "h"); }, "has an empty group");
  has([] { groups_from_list("0,1.5", 2, "h"); }, "'1.5' is not a rank");
}

TEST(Groups, ByHostGroupsEqualNames) {
  EXPECT_EQ(groups_by_host({"a", "b", "a", "b"}), (V{0, 1, 0, 1}));
  EXPECT_EQ(groups_by_host({"x", "x", "x"}), (V{0, 0, 0}));
  EXPECT_EQ(groups_by_host({"n1", "n2", "n3"}), (V{0, 1, 2}));
}

}  // namespace
