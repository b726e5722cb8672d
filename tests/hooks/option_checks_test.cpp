// ABI 1.5 check() of the shipped hooks, called through their C tables as
// the loader does: each rule refuses with the option at fault, and create()
// refuses the same options with the same message (one rule, one source);
// the fp16/bf16 wrappers tell the loader what dtype their inner hook gets.
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/base/options.h"
#include "tests/hooks/hook_runner.h"
#include "tests/hooks/thread_comm.h"

namespace {

using ddph_test::ErrorInfo;
using ddph_test::find_hook;
using ddph_test::HookInstance;
using ddph_test::take_error;
using ddph_test::ThreadGroup;

using Given = std::vector<std::pair<std::string, std::string>>;

struct CheckResult {
  ErrorInfo error;
  std::string bad_option;  // "" when NULL
  DLDataType inner{};
};

CheckResult check(const ddph_hook_t* h, const ddph::OptionList& options,
                  DLDataType bucket_dtype = DLDataType{}) {
  EXPECT_GE(h->struct_size, size_t(DDPH_HOOK_SIZE_V1_5)) << h->name;
  EXPECT_NE(h->check, nullptr) << h->name;
  ddph_check_t c{};
  c.struct_size = sizeof c;
  c.host = ddph_host();
  c.options = options.data();
  c.num_options = options.size();
  c.bucket_dtype = bucket_dtype;
  CheckResult r;
  r.error = take_error(h->check(&c));
  if (c.bad_option != nullptr) r.bad_option = c.bad_option;
  r.inner = c.inner_bucket_dtype;
  return r;
}

ErrorInfo create(const ddph_hook_t* h, const ddph::OptionList& options, ddph_comm_t* comm,
                 const ddph_hook_ref_t* inner) {
  ddph_hook_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.comm = comm;
  init.inner = inner;
  init.options = options.data();
  init.num_options = options.size();
  void* state = nullptr;
  ErrorInfo e = take_error(h->create(&init, &state));
  if (state != nullptr) h->destroy(state);
  return e;
}

struct Refused {
  const char* family;
  const char* hook;
  Given options;
  const char* bad_option;
  const char* says;
};

const std::vector<Refused>& refused() {
  static const std::vector<Refused> cases = {
      // PyTorch's PowerSGDState: start_iter <= 1 with error feedback or warm start.
      {"powersgd", "powersgd", {{"start_iter", "1"}}, "start_iter", "it must be > 1"},
      {"powersgd",
       "powersgd",
       {{"start_iter", "0"}, {"error_feedback", "false"}},
       "start_iter",
       "warm_start"},
      {"powersgd", "batched_powersgd", {{"start_iter", "1"}}, "start_iter", "it must be > 1"},
      // torch.optim.SGD: nesterov needs momentum and zero dampening.
      {"optimizer_overlap",
       "hook_then_optimizer",
       {{"nesterov", "true"}},
       "nesterov",
       "momentum > 0 and dampening 0"},
      {"optimizer_overlap",
       "hook_then_optimizer",
       {{"nesterov", "true"}, {"momentum", "0.9"}, {"dampening", "0.5"}},
       "nesterov",
       "dampening 0.5"},
      {"optimizer_overlap", "hook_then_optimizer", {{"beta1", "1"}}, "beta1", "[0, 1)"},
      {"optimizer_overlap", "hook_then_optimizer", {{"params", "3-1"}}, "params", "range '3-1'"},
      // PyTorch's HierarchicalModelAverager: periods increase.
      {"post_localsgd",
       "model_averaging",
       {{"hierarchy", "4:2,2:4"}},
       "hierarchy",
       "periods must increase"},
  };
  return cases;
}

ddph::OptionList options_of(const ddph_hook_t* h, const Given& given) {
  return ddph::resolve_options(h->options, h->num_options, given);
}

}  // namespace

TEST(OptionChecks, EachRuleRefusesNamingItsOption) {
  for (const Refused& c : refused()) {
    const ddph_hook_t* h = find_hook(c.family, c.hook);
    const CheckResult r = check(h, options_of(h, c.options));
    EXPECT_EQ(r.error.code, DDPH_INVALID_ARGUMENT) << c.hook << ": " << r.error.message;
    EXPECT_EQ(r.bad_option, c.bad_option) << c.hook << ": " << r.error.message;
    EXPECT_NE(r.error.message.find(c.says), std::string::npos) << r.error.message;
  }
}

// create() runs the same function: the same options, the same message.
TEST(OptionChecks, CreateRefusesWhatCheckRefusesWithTheSameMessage) {
  ThreadGroup group(1, ddph_host());
  HookInstance inner(find_hook("default", "allreduce"), group.comm(0));
  const ddph_hook_ref_t ref = inner.ref();
  for (const Refused& c : refused()) {
    const ddph_hook_t* h = find_hook(c.family, c.hook);
    const ddph::OptionList options = options_of(h, c.options);
    const CheckResult r = check(h, options);
    const bool wraps = (h->flags & DDPH_HOOK_NEEDS_INNER) != 0;
    const ErrorInfo e = create(h, options, group.comm(0), wraps ? &ref : nullptr);
    EXPECT_EQ(e.code, r.error.code) << c.hook << ": " << e.message;
    EXPECT_EQ(e.message, r.error.message) << c.hook;
  }
}

// Every hook with a check accepts its defaults, as create() does.
TEST(OptionChecks, DefaultsAreAccepted) {
  const std::pair<const char*, const char*> hooks[] = {{"powersgd", "powersgd"},
                                                       {"powersgd", "batched_powersgd"},
                                                       {"quantization", "per_tensor"},
                                                       {"quantization", "per_channel"},
                                                       {"quantization", "per_channel_gather"},
                                                       {"default", "fp16_wrapper"},
                                                       {"default", "bf16_wrapper"},
                                                       {"optimizer_overlap", "hook_then_optimizer"},
                                                       {"post_localsgd", "model_averaging"}};
  for (const auto& [family, name] : hooks) {
    const ddph_hook_t* h = find_hook(family, name);
    const CheckResult r = check(h, options_of(h, {}));
    EXPECT_EQ(r.error.code, DDPH_OK) << name << ": " << r.error.message;
    EXPECT_EQ(r.bad_option, "") << name;
  }
}

// fp16_wrapper hands its inner hook float16 buckets, bf16_wrapper bfloat16;
// quantization takes float32 only, and says what to do about the wrapper.
TEST(OptionChecks, WrappersNameTheirInnerDtypeAndQuantizationRefuses16Bit) {
  const CheckResult fp16 = check(find_hook("default", "fp16_wrapper"), ddph::OptionList());
  EXPECT_EQ(fp16.error.code, DDPH_OK);
  EXPECT_EQ(fp16.inner.code, kDLFloat);
  EXPECT_EQ(fp16.inner.bits, 16);
  EXPECT_EQ(fp16.inner.lanes, 1);
  const CheckResult bf16 = check(find_hook("default", "bf16_wrapper"), ddph::OptionList());
  EXPECT_EQ(bf16.error.code, DDPH_OK);
  EXPECT_EQ(bf16.inner.code, kDLBfloat);
  EXPECT_EQ(bf16.inner.bits, 16);

  for (const char* name : {"per_tensor", "per_channel", "per_channel_gather"}) {
    const ddph_hook_t* q = find_hook("quantization", name);
    const ddph::OptionList defaults = options_of(q, {});
    for (const DLDataType& low : {fp16.inner, bf16.inner}) {
      const CheckResult r = check(q, defaults, low);
      EXPECT_EQ(r.error.code, DDPH_UNSUPPORTED) << name << ": " << r.error.message;
      EXPECT_EQ(r.bad_option, "") << name;
      EXPECT_NE(r.error.message.find("takes float32 buckets only"), std::string::npos)
          << r.error.message;
      EXPECT_NE(r.error.message.find("remove the fp16_wrapper/bf16_wrapper"), std::string::npos)
          << r.error.message;
    }
    EXPECT_EQ(check(q, defaults, DLDataType{kDLFloat, 32, 1}).error.code, DDPH_OK) << name;
  }
  // Hooks that take 16-bit buckets accept them.
  const ddph_hook_t* psgd = find_hook("powersgd", "powersgd");
  EXPECT_EQ(check(psgd, options_of(psgd, {}), fp16.inner).error.code, DDPH_OK);
}

// A caller's misuse is an error, not a crash.
TEST(OptionChecks, ANullOrTooSmallCheckStructIsRefused) {
  const ddph_hook_t* h = find_hook("powersgd", "powersgd");
  EXPECT_EQ(take_error(h->check(nullptr)).code, DDPH_INVALID_ARGUMENT);
  ddph_check_t c{};
  c.struct_size = 8;
  EXPECT_EQ(take_error(h->check(&c)).code, DDPH_INVALID_ARGUMENT);
}
