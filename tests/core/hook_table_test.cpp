// hook_table<T>(): a hook's C table made from what its class declares, so
// that a family lists its hooks and nothing else. The table must show
// exactly the class's name, summary, flags and options, offer check() when
// the class has check_options, and offer checkpoints exactly when the class
// overrides save_state and load_state.
#include <gtest/gtest.h>

#include "core/base/options.h"
#include "core/hook/hook.h"

namespace {

const ddph_option_spec_t kSpecs[] = {
    ddph::spec_int("period", "4", "every this many steps", 1, 100),
    ddph::spec_bool("warm", "true", "start warm"),
};

// Declares everything a hook class may declare.
class FullHook : public ddph::Hook {
 public:
  static constexpr ddph::HookListing kListing{"full", "declares every part of its table"};
  static constexpr uint32_t kFlags = DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS;
  static ddph::OptionSpecs option_specs() { return kSpecs; }
  static void check_options(ddph::OptionCheck&) {}
  explicit FullHook(const ddph_hook_init_t&) {}
  void run(const ddph_bucket_t&, ddph::DType, const ddph::Completion& done) override { done.ok(); }
  void save_state(ddph_write_fn, void*) override {}
  void load_state(const void*, size_t) override {}
};

// Declares its listing only.
class BareHook : public ddph::Hook {
 public:
  static constexpr ddph::HookListing kListing{"bare", "declares its listing only"};
  explicit BareHook(const ddph_hook_init_t&) {}
  void run(const ddph_bucket_t&, ddph::DType, const ddph::Completion& done) override { done.ok(); }
};

// Keeps state through a base class that overrides the checkpoint pair.
class StateBase : public ddph::Hook {
 public:
  void save_state(ddph_write_fn, void*) override {}
  void load_state(const void*, size_t) override {}
};
class DerivedStateHook final : public StateBase {
 public:
  static constexpr ddph::HookListing kListing{"derived", "keeps state through its base"};
  explicit DerivedStateHook(const ddph_hook_init_t&) {}
  void run(const ddph_bucket_t&, ddph::DType, const ddph::Completion& done) override { done.ok(); }
};

TEST(HookTable, ShowsWhatTheClassDeclares) {
  const ddph_hook_t& t = ddph::hook_table<FullHook>();
  EXPECT_EQ(t.struct_size, sizeof(ddph_hook_t));
  EXPECT_STREQ(t.name, "full");
  EXPECT_STREQ(t.summary, "declares every part of its table");
  EXPECT_EQ(t.flags, uint32_t(DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS));
  EXPECT_EQ(t.options, kSpecs);
  EXPECT_EQ(t.num_options, 2u);
  EXPECT_NE(t.check, nullptr);
  EXPECT_NE(t.save_state, nullptr);
  EXPECT_NE(t.load_state, nullptr);
  EXPECT_NE(t.create, nullptr);
  EXPECT_NE(t.run_bucket, nullptr);
  EXPECT_NE(t.destroy, nullptr);
  EXPECT_NE(t.stats, nullptr);
}

TEST(HookTable, WhatTheClassLeavesOutIsAbsent) {
  const ddph_hook_t& t = ddph::hook_table<BareHook>();
  EXPECT_STREQ(t.name, "bare");
  EXPECT_EQ(t.flags, 0u);
  EXPECT_EQ(t.options, nullptr);
  EXPECT_EQ(t.num_options, 0u);
  EXPECT_EQ(t.check, nullptr);
  EXPECT_EQ(t.save_state, nullptr);
  EXPECT_EQ(t.load_state, nullptr);
}

TEST(HookTable, CheckpointsFollowOverridesInABaseClass) {
  const ddph_hook_t& t = ddph::hook_table<DerivedStateHook>();
  EXPECT_NE(t.save_state, nullptr);
  EXPECT_NE(t.load_state, nullptr);
}

TEST(HookTable, IsMadeOncePerClass) {
  EXPECT_EQ(&ddph::hook_table<FullHook>(), &ddph::hook_table<FullHook>());
  EXPECT_NE(&ddph::hook_table<FullHook>(), &ddph::hook_table<BareHook>());
}

}  // namespace
