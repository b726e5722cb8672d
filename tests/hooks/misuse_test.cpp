// Misuse of the default and debugging hooks returns an error with a message
// and never calls done; a good bucket calls done exactly once.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/hooks/hook_runner.h"
#include "tests/hooks/thread_comm.h"

namespace {

using ddph::DType;
using namespace ddph_test;

struct Named {
  const char* family;
  const char* name;
  bool wrapper;
};
const Named kHooks[] = {{"default", "allreduce", false},     {"default", "fp16_compress", false},
                        {"default", "bf16_compress", false}, {"default", "fp16_wrapper", true},
                        {"default", "bf16_wrapper", true},   {"debugging", "noop", false}};

// A hook of kHooks made on a one-rank group; wrappers wrap allreduce.
class OneRank {
 public:
  explicit OneRank(const Named& h) : group_(1, ddph_host()) {
    if (h.wrapper) {
      inner_ = std::make_unique<HookInstance>(find_hook("default", "allreduce"), group_.comm(0));
      inner_ref_ = inner_->ref();
    }
    hook_ = std::make_unique<HookInstance>(find_hook(h.family, h.name), group_.comm(0),
                                           h.wrapper ? &inner_ref_ : nullptr);
  }
  ddph_hook_ref_t ref() const { return hook_->ref(); }
  ddph_comm_t* comm() { return group_.comm(0); }

 private:
  ThreadGroup group_;
  std::unique_ptr<HookInstance> inner_;
  ddph_hook_ref_t inner_ref_{};
  std::unique_ptr<HookInstance> hook_;
};

void expect_refused(const RunOutcome& o, ddph_code_t code, const char* needle) {
  EXPECT_EQ(o.returned.code, code) << o.returned.message;
  EXPECT_FALSE(o.returned.message.empty());
  EXPECT_NE(o.returned.message.find(needle), std::string::npos) << o.returned.message;
  EXPECT_EQ(o.done_calls, 0) << "done called after run_bucket returned an error";
}

TEST(HookContract, PluginsDescribeThemselves) {
  for (const char* family : {"default", "debugging"}) {
    const ddph_plugin_t* p = load_plugin(family);
    EXPECT_GE(p->struct_size, DDPH_PLUGIN_SIZE_V1_0);
    EXPECT_EQ(p->abi_major, unsigned(DDPH_ABI_MAJOR));
    EXPECT_STREQ(p->family, family);
    EXPECT_EQ(p->num_comms, 0u);
    for (size_t i = 0; i < p->num_hooks; ++i) {
      const ddph_hook_t* h = p->hooks[i];
      EXPECT_GE(h->struct_size, DDPH_HOOK_SIZE_V1_0);
      EXPECT_TRUE(h->summary != nullptr && *h->summary) << h->name;
      EXPECT_TRUE(h->num_options == 0 || h->options != nullptr) << h->name;
      EXPECT_TRUE(h->create && h->run_bucket && h->destroy && h->stats) << h->name;
      EXPECT_EQ(h->save_state, nullptr) << h->name << " keeps no state to save";
    }
  }
  EXPECT_EQ(load_plugin("default")->num_hooks, 5u);
  EXPECT_EQ(find_hook("default", "fp16_wrapper")->flags & DDPH_HOOK_NEEDS_INNER,
            DDPH_HOOK_NEEDS_INNER);
}

TEST(HookContract, GoodBucketCallsDoneExactlyOnce) {
  for (const Named& h : kHooks) {
    OneRank one(h);
    std::vector<float> data(1000, 2.0f);
    for (int step = 0; step < 3; ++step) {
      BucketView b(data.data(), dl(DType::F32), 1000, 0, uint64_t(step));
      RunOutcome o = run_bucket(one.ref(), &b.bucket);
      EXPECT_EQ(o.returned.code, DDPH_OK) << h.name << ": " << o.returned.message;
      EXPECT_EQ(o.done_calls, 1) << h.name;
      EXPECT_EQ(o.completed.code, DDPH_OK) << h.name;
    }
    EXPECT_EQ(data[999], 2.0f) << h.name << ": the mean over one rank is the value itself";
    BucketView empty(nullptr, dl(DType::F32), 0);
    EXPECT_EQ(run_bucket(one.ref(), &empty.bucket).done_calls, 1) << h.name << " on 0 elements";
  }
}

TEST(HookContract, NullBucketStateOrDoneIsRefused) {
  for (const Named& h : kHooks) {
    SCOPED_TRACE(h.name);
    OneRank one(h);
    expect_refused(run_bucket(one.ref(), nullptr), DDPH_INVALID_ARGUMENT, "bucket is NULL");
    std::vector<float> data(10);
    BucketView b(data.data(), dl(DType::F32), 10);
    ddph_hook_ref_t no_state{one.ref().hook, nullptr};
    expect_refused(run_bucket(no_state, &b.bucket), DDPH_INVALID_ARGUMENT, "state is NULL");
    ErrorInfo e =
        take_error(one.ref().hook->run_bucket(one.ref().state, &b.bucket, nullptr, nullptr));
    EXPECT_EQ(e.code, DDPH_INVALID_ARGUMENT);
    EXPECT_NE(e.message.find("done"), std::string::npos) << e.message;
    b.bucket.struct_size = 8;
    expect_refused(run_bucket(one.ref(), &b.bucket), DDPH_INVALID_ARGUMENT, "struct_size");
    BucketView no_data(nullptr, dl(DType::F32), 10);
    expect_refused(run_bucket(one.ref(), &no_data.bucket), DDPH_INVALID_ARGUMENT, "data is NULL");
    ddph_stats_t small{};
    small.struct_size = 4;
    EXPECT_EQ(take_error(one.ref().hook->stats(one.ref().state, &small)).code,
              DDPH_INVALID_ARGUMENT);
  }
}

TEST(HookContract, DtypesAHookCannotReduceAreNamed) {
  for (const Named& h : kHooks) {
    SCOPED_TRACE(h.name);
    OneRank one(h);
    std::vector<int8_t> data(16);
    BucketView b(data.data(), DLDataType{kDLInt, 8, 1}, 16);
    expect_refused(run_bucket(one.ref(), &b.bucket), DDPH_UNSUPPORTED, "int8");
  }
  const char* lowp[][2] = {{"fp16_compress", "bfloat16"},
                           {"bf16_compress", "float16"},
                           {"fp16_wrapper", "bfloat16"},
                           {"bf16_wrapper", "float16"}};
  for (auto& h : lowp) {
    SCOPED_TRACE(h[0]);
    OneRank one({"default", h[0], std::strstr(h[0], "wrapper") != nullptr});
    std::vector<int32_t> ints(16);
    BucketView i32(ints.data(), dl(DType::I32), 16);
    expect_refused(run_bucket(one.ref(), &i32.bucket), DDPH_UNSUPPORTED, "int32");
    std::vector<uint16_t> other(16);
    BucketView wrong_low(other.data(), dl(h[1][0] == 'b' ? DType::BF16 : DType::F16), 16);
    expect_refused(run_bucket(one.ref(), &wrong_low.bucket), DDPH_UNSUPPORTED, h[1]);
  }
}

TEST(HookContract, WrappersNeedAnInnerHookAndOthersRefuseOne) {
  ThreadGroup group(1, ddph_host());
  for (const char* w : {"fp16_wrapper", "bf16_wrapper"}) {
    ErrorInfo e = try_create(find_hook("default", w), group.comm(0), nullptr);
    EXPECT_EQ(e.code, DDPH_INVALID_ARGUMENT) << w;
    EXPECT_NE(e.message.find("inner"), std::string::npos) << e.message;
  }
  HookInstance inner(find_hook("default", "allreduce"), group.comm(0));
  ddph_hook_ref_t ref = inner.ref();
  for (const char* name : {"allreduce", "fp16_compress", "bf16_compress"}) {
    ErrorInfo e = try_create(find_hook("default", name), group.comm(0), &ref);
    EXPECT_EQ(e.code, DDPH_INVALID_ARGUMENT) << name;
  }
  EXPECT_EQ(try_create(find_hook("debugging", "noop"), group.comm(0), &ref).code,
            DDPH_INVALID_ARGUMENT);
  EXPECT_EQ(try_create(find_hook("default", "allreduce"), nullptr, nullptr).code,
            DDPH_INVALID_ARGUMENT);
  void* state = reinterpret_cast<void*>(1);
  EXPECT_EQ(take_error(find_hook("default", "allreduce")->create(nullptr, &state)).code,
            DDPH_INVALID_ARGUMENT);
  EXPECT_EQ(state, nullptr);
}

TEST(HookContract, InnerErrorsReachTheWrapperCaller) {
  ThreadGroup group(1, ddph_host());
  HookInstance inner(find_hook("default", "allreduce"), group.comm(0));
  ddph_hook_ref_t ref = inner.ref();
  HookInstance wrapper(find_hook("default", "fp16_wrapper"), group.comm(0), &ref);
  ddph_comm_t* comm = group.comm(0);
  auto saved = comm->allreduce;
  comm->allreduce = nullptr;  // the inner allreduce now fails: UNSUPPORTED
  std::vector<float> data(64, 1.0f);
  BucketView b(data.data(), dl(DType::F32), 64);
  RunOutcome o = run_bucket(wrapper.ref(), &b.bucket);
  comm->allreduce = saved;
  EXPECT_EQ(o.returned.code, DDPH_UNSUPPORTED) << o.returned.message;
  EXPECT_NE(o.returned.message.find("allreduce"), std::string::npos) << o.returned.message;
  EXPECT_EQ(o.done_calls, 0);
}

TEST(HookContract, CreateAndDestroyRepeatedly) {
  ThreadGroup group(1, ddph_host());
  for (int i = 0; i < 100; ++i)
    for (const Named& h : kHooks) {
      if (h.wrapper) continue;
      EXPECT_EQ(try_create(find_hook(h.family, h.name), group.comm(0), nullptr).code, DDPH_OK);
    }
}

}  // namespace
