// The plugin contract, checked on every libddph_*.so in the plugin directory:
// tables and struct sizes, option schemas, create/destroy without leaks,
// completion exactly once, and misuse answered with errors, not crashes.
#include <ddph/ddph.h>
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/options.h"
#include "tests/conformance/self_comm.h"
#include "tests/support/lent_bucket.h"

namespace {

struct Loaded {
  std::string file, family;
  const ddph_plugin_t* plugin = nullptr;
};

const std::vector<Loaded>& plugins() {
  static std::vector<Loaded> all = [] {
    std::vector<Loaded> v;
    DIR* d = opendir(DDPH_PLUGIN_DIR);
    if (d == nullptr) return v;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      const std::string pre = "libddph_", post = ".so";
      if (name.size() <= pre.size() + post.size() || name.compare(0, pre.size(), pre) != 0 ||
          name.compare(name.size() - post.size(), post.size(), post) != 0)
        continue;
      Loaded l;
      l.file = std::string(DDPH_PLUGIN_DIR) + "/" + name;
      l.family = name.substr(pre.size(), name.size() - pre.size() - post.size());
      void* lib = dlopen(l.file.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open for the run
      if (lib != nullptr) {
        auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(lib, "ddph_plugin_entry"));
        if (entry != nullptr) l.plugin = entry(ddph_host());
      }
      v.push_back(l);
    }
    closedir(d);
    return v;
  }();
  return all;
}

struct HookCase {
  std::string family;
  const ddph_hook_t* hook;
};

std::vector<HookCase> hook_cases() {
  std::vector<HookCase> v;
  for (const Loaded& l : plugins())
    if (l.plugin != nullptr)
      for (size_t i = 0; i < l.plugin->num_hooks; ++i) v.push_back({l.family, l.plugin->hooks[i]});
  return v;
}

// Options at their defaults, as the loader would hand them over.
ddph::OptionList defaults(const ddph_hook_t* h) {
  return ddph::resolve_options(h->options, h->num_options, {});
}

const ddph_hook_t* find_hook(const char* family, const char* name) {
  for (const Loaded& l : plugins())
    if (l.plugin != nullptr && l.family == family)
      for (size_t i = 0; i < l.plugin->num_hooks; ++i)
        if (std::strcmp(l.plugin->hooks[i]->name, name) == 0) return l.plugin->hooks[i];
  return nullptr;
}

// A created hook; wrappers get default/allreduce as their inner hook.
class Instance {
 public:
  explicit Instance(const ddph_hook_t* h) : hook_(h) {
    ddph::OptionList opts = defaults(h);
    ddph_hook_init_t init{};
    init.struct_size = sizeof init;
    init.host = ddph_host();
    init.comm = ddph_test::self_comm();
    init.options = opts.data();
    init.num_options = opts.size();
    if (h->flags & DDPH_HOOK_NEEDS_INNER) {
      inner_hook_ = find_hook("default", "allreduce");
      if (inner_hook_ == nullptr) return;
      ddph::OptionList inner_opts = defaults(inner_hook_);
      ddph_hook_init_t ii = init;
      ii.options = inner_opts.data();
      ii.num_options = inner_opts.size();
      error_ = inner_hook_->create(&ii, &inner_.state);
      if (error_ != nullptr) return;
      inner_.hook = inner_hook_;
      init.inner = &inner_;
    }
    error_ = h->create(&init, &state_);
  }
  ~Instance() {
    if (state_ != nullptr) hook_->destroy(state_);
    if (inner_.state != nullptr) inner_hook_->destroy(inner_.state);
    ddph_error_free(error_);
  }
  void* state() const { return state_; }
  const char* error() const { return error_ ? ddph_error_message(error_) : nullptr; }

 private:
  const ddph_hook_t* hook_;
  const ddph_hook_t* inner_hook_ = nullptr;
  ddph_hook_ref_t inner_{nullptr, nullptr};
  void* state_ = nullptr;
  ddph_error_t* error_ = nullptr;
};

// The parameter's own tensor is lent to every hook: optimizer hooks
// (DDPH_HOOK_NEEDS_PARAMS) update it, mixed_precision writes its fp32
// gradient there, the others ignore it.
struct Bucket : ddph_test::LentBucket {
  explicit Bucket(int64_t n) : LentBucket(n, 4, 4) {}
};

struct DoneCounter {
  std::atomic<int> calls{0};
  std::atomic<int> errors{0};
  static void on_done(void* user, ddph_error_t* e) {
    auto* c = static_cast<DoneCounter*>(user);
    if (e != nullptr) ++c->errors;
    ddph_error_free(e);
    ++c->calls;
  }
  void wait_for(int n) {
    for (int i = 0; i < 500 && calls.load() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

TEST(Conformance, PluginsAreFoundAndLoad) {
  ASSERT_FALSE(plugins().empty()) << "no plugins in " << DDPH_PLUGIN_DIR;
  for (const Loaded& l : plugins()) {
    SCOPED_TRACE(l.file);
    ASSERT_NE(l.plugin, nullptr) << "ddph_plugin_entry missing or returned NULL";
    EXPECT_GE(l.plugin->struct_size, size_t(DDPH_PLUGIN_SIZE_V1_0));
    EXPECT_EQ(l.plugin->abi_major, uint32_t(DDPH_ABI_MAJOR));
    ASSERT_NE(l.plugin->family, nullptr);
    EXPECT_EQ(l.family, l.plugin->family) << "family must match the file name";
    EXPECT_NE(l.plugin->version, nullptr);
    EXPECT_TRUE(l.plugin->num_hooks == 0 || l.plugin->hooks != nullptr);
    EXPECT_TRUE(l.plugin->num_comms == 0 || l.plugin->comms != nullptr);
    EXPECT_GT(l.plugin->num_hooks + l.plugin->num_comms, 0u) << "a plugin offers nothing";
  }
}

TEST(Conformance, EntryRejectsAForeignHost) {
  for (const Loaded& l : plugins()) {
    SCOPED_TRACE(l.file);
    void* lib = dlopen(l.file.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr);
    auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(lib, "ddph_plugin_entry"));
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry(nullptr), nullptr) << "a NULL host must be refused";
    ddph_host_t future = *ddph_host();
    future.abi_major = DDPH_ABI_MAJOR + 1;
    EXPECT_EQ(entry(&future), nullptr) << "a host of another ABI major must be refused";
    // Put the real host back for the rest of the run.
    EXPECT_NE(entry(ddph_host()), nullptr);
  }
}

TEST(Conformance, CommFactoriesAreWellFormedAndRejectMisuse) {
  for (const Loaded& l : plugins()) {
    if (l.plugin == nullptr) continue;
    for (size_t i = 0; i < l.plugin->num_comms; ++i) {
      const ddph_comm_factory_t* f = l.plugin->comms[i];
      SCOPED_TRACE(l.family);
      ASSERT_NE(f, nullptr);
      EXPECT_GE(f->struct_size, size_t(DDPH_COMM_FACTORY_SIZE_V1_0));
      ASSERT_NE(f->backend, nullptr);
      ASSERT_NE(f->create, nullptr);
      EXPECT_NO_THROW(ddph::resolve_options(f->options, f->num_options, {}));
      ddph_comm_t* out = nullptr;
      ddph_error_t* e = f->create(nullptr, &out);
      ASSERT_NE(e, nullptr) << "create(NULL) must fail";
      EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
      ddph_error_free(e);
      ddph_comm_init_t init{};
      init.struct_size = sizeof init;
      init.host = ddph_host();
      init.rank = 5;
      init.world_size = 2;
      init.rendezvous = "file:///tmp/ddph-conformance-unused";
      init.prefix = "conformance";
      init.timeout_ms = 1000;
      e = f->create(&init, &out);
      ASSERT_NE(e, nullptr) << "rank 5 of 2 must fail";
      EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
      EXPECT_NE(std::string(ddph_error_message(e)).find("rank"), std::string::npos)
          << ddph_error_message(e);
      ddph_error_free(e);
    }
  }
}

class HookConformance : public ::testing::TestWithParam<HookCase> {};

TEST_P(HookConformance, TableIsWellFormed) {
  const ddph_hook_t* h = GetParam().hook;
  ASSERT_NE(h, nullptr);
  EXPECT_GE(h->struct_size, size_t(DDPH_HOOK_SIZE_V1_0));
  ASSERT_NE(h->name, nullptr);
  EXPECT_NE(h->summary, nullptr);
  EXPECT_NE(h->create, nullptr);
  EXPECT_NE(h->run_bucket, nullptr);
  EXPECT_NE(h->destroy, nullptr);
  EXPECT_EQ(h->save_state == nullptr, h->load_state == nullptr)
      << "save_state and load_state come as a pair";
  EXPECT_TRUE(h->num_options == 0 || h->options != nullptr);
  for (size_t i = 0; i < h->num_options; ++i) {
    const ddph_option_spec_t& s = h->options[i];
    SCOPED_TRACE(s.name ? s.name : "(null)");
    EXPECT_GE(s.struct_size, size_t(DDPH_OPTION_SPEC_SIZE_V1_0));
    ASSERT_NE(s.name, nullptr);
    EXPECT_NE(s.doc, nullptr);
    EXPECT_LE(int(s.type), int(DDPH_STRING));
  }
  // Every default must parse against its own schema.
  EXPECT_NO_THROW(defaults(h));
}

TEST_P(HookConformance, CreateDestroyHundredTimesWithoutLeak) {
  const ddph_hook_t* h = GetParam().hook;
  {
    Instance warm(h);
    ASSERT_EQ(warm.error(), nullptr) << warm.error();
  }
  const size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 100; ++i) {
    Instance inst(h);
    ASSERT_EQ(inst.error(), nullptr) << inst.error();
    ASSERT_NE(inst.state(), nullptr);
  }
  const size_t after = mallinfo2().uordblks;
  EXPECT_LT(after > before ? after - before : 0, size_t(16 * 1024))
      << "heap grew by " << (after - before) << " bytes over 100 create/destroy cycles";
}

TEST_P(HookConformance, CompletionIsCalledExactlyOnce) {
  const ddph_hook_t* h = GetParam().hook;
  Instance inst(h);
  ASSERT_EQ(inst.error(), nullptr) << inst.error();
  for (int step = 0; step < 3; ++step) {
    Bucket b(64);
    b.b.step = step;
    DoneCounter done;
    ddph_error_t* e = h->run_bucket(inst.state(), &b.b, &DoneCounter::on_done, &done);
    ASSERT_EQ(e, nullptr) << ddph_error_message(e);
    done.wait_for(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a second call would land here
    EXPECT_EQ(done.calls.load(), 1);
    EXPECT_EQ(done.errors.load(), 0);
  }
}

// Each misuse must return an error with a message and never call done.
TEST_P(HookConformance, MisuseReturnsErrorsWithoutCallingDone) {
  const ddph_hook_t* h = GetParam().hook;
  Instance inst(h);
  ASSERT_EQ(inst.error(), nullptr) << inst.error();
  DoneCounter done;
  auto expect_refused = [&](void* state, const ddph_bucket_t* b, ddph_done_fn fn,
                            const char* what) {
    ddph_error_t* e = h->run_bucket(state, b, fn, &done);
    ASSERT_NE(e, nullptr) << what << " was accepted";
    EXPECT_TRUE(ddph_error_code(e) == DDPH_INVALID_ARGUMENT ||
                ddph_error_code(e) == DDPH_UNSUPPORTED)
        << what << ": " << ddph_error_message(e);
    EXPECT_GT(std::strlen(ddph_error_message(e)), 10u) << what;
    ddph_error_free(e);
  };
  Bucket good(64);
  expect_refused(nullptr, &good.b, &DoneCounter::on_done, "NULL state");
  expect_refused(inst.state(), nullptr, &DoneCounter::on_done, "NULL bucket");
  expect_refused(inst.state(), &good.b, nullptr, "NULL done");
  Bucket small(64);
  small.b.struct_size = 0;
  expect_refused(inst.state(), &small.b, &DoneCounter::on_done, "struct_size 0");
  Bucket two_d(64);
  two_d.b.buffer.ndim = 2;
  expect_refused(inst.state(), &two_d.b, &DoneCounter::on_done, "2-D buffer");
  Bucket null_data(64);
  null_data.b.buffer.data = nullptr;
  expect_refused(inst.state(), &null_data.b, &DoneCounter::on_done, "NULL data");
  Bucket negative(64);
  negative.shape[0] = -5;
  expect_refused(inst.state(), &negative.b, &DoneCounter::on_done, "negative length");
  Bucket complex(64);
  complex.b.buffer.dtype = {kDLComplex, 64, 1};
  expect_refused(inst.state(), &complex.b, &DoneCounter::on_done, "complex64 dtype");
  Bucket outside(64);
  outside.param.offset = 60;  // a 4x4 view at 60 runs past 64 elements
  expect_refused(inst.state(), &outside.b, &DoneCounter::on_done, "param outside the buffer");
  Bucket huge(64);
  huge.param_shape[0] = int64_t(1) << 40;
  huge.param_shape[1] = int64_t(1) << 40;
  expect_refused(inst.state(), &huge.b, &DoneCounter::on_done, "overflowing param shape");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(done.calls.load(), 0) << "done was called for a refused bucket";
}

TEST_P(HookConformance, CreateMisuseAndStatsMisuse) {
  const ddph_hook_t* h = GetParam().hook;
  void* state = nullptr;
  ddph_error_t* e = h->create(nullptr, &state);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  ddph_error_free(e);
  ddph_hook_init_t init{};
  init.struct_size = 0;
  e = h->create(&init, &state);
  ASSERT_NE(e, nullptr) << "struct_size 0 was accepted";
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  ddph_error_free(e);
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.comm = nullptr;
  e = h->create(&init, &state);
  ASSERT_NE(e, nullptr) << "NULL comm was accepted";
  EXPECT_NE(std::string(ddph_error_message(e)).find("comm"), std::string::npos);
  ddph_error_free(e);
  if (h->stats != nullptr) {
    Instance inst(h);
    ASSERT_EQ(inst.error(), nullptr);
    ddph_stats_t st{};
    st.struct_size = 3;
    e = h->stats(inst.state(), &st);
    ASSERT_NE(e, nullptr) << "stats with struct_size 3 was accepted";
    ddph_error_free(e);
  }
}

std::string case_name(const ::testing::TestParamInfo<HookCase>& info) {
  return info.param.family + "_" + info.param.hook->name;
}

INSTANTIATE_TEST_SUITE_P(AllHooks, HookConformance, ::testing::ValuesIn(hook_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HookConformance);

}  // namespace
