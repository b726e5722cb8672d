// hook_table<T>(): a hook's C table made from what its class declares, so
// that a family lists its hooks and nothing else. The table must show
// exactly the class's name, summary, flags and options, offer check() when
// the class has check_options, and offer checkpoints exactly when the class
// overrides save_state and load_state.
#include <gtest/gtest.h>

#include <string>

#include "core/base/host.h"
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
  // Adds 1 to every float of the bucket; bucket 7 holds a residual of the
  // wrong layout.
  void take_residual(const ddph_bucket_t& bucket, ddph::DType) override {
    DDPH_CHECK(bucket.index != 7, DDPH_INVALID_ARGUMENT, "bucket 7: wrong layout");
    float* x = static_cast<float*>(bucket.buffer.data);
    for (int64_t i = 0; i < bucket.buffer.shape[0]; ++i) x[i] += 1;
  }
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
  EXPECT_NE(t.take_residual, nullptr);
}

// ABI 1.10: take_residual reaches the class's override with a validated
// bucket, and its exceptions come back as error objects.
TEST(HookTable, TakeResidualReachesTheClassAndReturnsItsErrors) {
  ddph::set_host(ddph_host());  // libddph.so's, which makes the error objects
  const ddph_hook_t& t = ddph::hook_table<FullHook>();
  ASSERT_GE(t.struct_size, DDPH_HOOK_SIZE_V1_10);
  FullHook hook(ddph_hook_init_t{});
  void* state = static_cast<ddph::Hook*>(&hook);
  float data[3] = {1, 2, 3};
  int64_t shape = 3;
  ddph_bucket_t b{};
  b.struct_size = sizeof b;
  b.index = 2;
  b.buffer.data = data;
  b.buffer.device = DLDevice{kDLCPU, 0};
  b.buffer.ndim = 1;
  b.buffer.dtype = DLDataType{kDLFloat, 32, 1};
  b.buffer.shape = &shape;
  EXPECT_EQ(t.take_residual(state, &b), nullptr);
  EXPECT_EQ(data[0], 2.0f);
  EXPECT_EQ(data[2], 4.0f);
  b.index = 7;
  ddph_error_t* e = t.take_residual(state, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddph_error_message(e)).find("bucket 7"), std::string::npos);
  ddph_error_free(e);
  e = t.take_residual(nullptr, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  ddph_error_free(e);
  e = t.take_residual(state, nullptr);
  ASSERT_NE(e, nullptr);
  ddph_error_free(e);
  EXPECT_EQ(data[0], 2.0f);
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
  EXPECT_EQ(t.take_residual, nullptr);
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
