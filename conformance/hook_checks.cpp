#include "conformance/hook_checks.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "conformance/harness.h"
#include "conformance/self_comm.h"
#include "core/base/options.h"

namespace ddph::plugin_checks {
namespace {

Outcome pass(std::string detail = "") {
  return {Status::kPass, std::move(detail)};
}
Outcome fail(std::string detail) {
  return {Status::kFail, std::move(detail)};
}

// create() with defaults cannot run for a hook with a required option.
bool needs_options(const ddph_hook_t* h, Outcome* out) {
  const std::string req = required_option(h);
  if (req.empty()) return false;
  *out = {Status::kSkip, "option '" + req + "' has no default; checks create hooks with defaults"};
  return true;
}

bool valid_choices(const char* choices, std::string* why) {
  std::string item;
  for (const char* p = choices;; ++p) {
    if (*p == '|' || *p == '\0') {
      if (item.empty()) {
        *why = std::string("choices '") + choices + "' has an empty item";
        return false;
      }
      item.clear();
      if (*p == '\0') return true;
    } else {
      item += *p;
    }
  }
}

Outcome check_table(const ddph_hook_t* h, double) {
  if (h->struct_size < DDPH_HOOK_SIZE_V1_0)
    return fail("hook struct_size " + std::to_string(h->struct_size) + " < DDPH_HOOK_SIZE_V1_0 (" +
                std::to_string(DDPH_HOOK_SIZE_V1_0) + ")");
  if (h->name == nullptr || h->name[0] == '\0') return fail("name is NULL or empty");
  if (h->summary == nullptr) return fail("summary is NULL");
  if (h->create == nullptr || h->run_bucket == nullptr || h->destroy == nullptr)
    return fail("create, run_bucket and destroy are required");
  if ((h->save_state == nullptr) != (h->load_state == nullptr))
    return fail("save_state and load_state come as a pair");
  if (h->num_options > 0 && h->options == nullptr)
    return fail("num_options > 0 but options is NULL");
  std::set<std::string> names;
  for (size_t i = 0; i < h->num_options; ++i) {
    const ddph_option_spec_t& s = h->options[i];
    const std::string at = "options[" + std::to_string(i) + "]";
    if (s.struct_size < DDPH_OPTION_SPEC_SIZE_V1_0)
      return fail(at + ".struct_size " + std::to_string(s.struct_size) +
                  " < DDPH_OPTION_SPEC_SIZE_V1_0");
    if (s.name == nullptr || s.name[0] == '\0') return fail(at + ".name is NULL or empty");
    if (!names.insert(s.name).second)
      return fail(std::string("option '") + s.name + "' appears twice");
    if (s.doc == nullptr) return fail(std::string("option '") + s.name + "' has no doc");
    if (int(s.type) < int(DDPH_BOOL) || int(s.type) > int(DDPH_STRING))
      return fail(std::string("option '") + s.name + "' has type " + std::to_string(int(s.type)));
    if (s.choices != nullptr) {
      if (s.type != DDPH_STRING && s.type != DDPH_INT)
        return fail(std::string("option '") + s.name + "': choices are for string and int options");
      std::string why;
      if (!valid_choices(s.choices, &why))
        return fail(std::string("option '") + s.name + "': " + why);
    }
    if (s.min_value <= s.max_value && s.type != DDPH_INT && s.type != DDPH_FLOAT)
      return fail(std::string("option '") + s.name + "': a range is for int and float options");
    if (std::isnan(s.min_value) || std::isnan(s.max_value))
      return fail(std::string("option '") + s.name + "': NaN bound");
  }
  // Each default must satisfy its own type, range and choices.
  try {
    ddph::resolve_options(h->options, h->num_options, {});
  } catch (const std::exception& e) {
    if (required_option(h).empty()) return fail(std::string("a default is invalid: ") + e.what());
  }
  return pass(std::to_string(h->num_options) + " options, defaults valid");
}

// ABI 1.5: a hook that offers check() accepts its own defaults.
Outcome check_option_check(const ddph_hook_t* h, double) {
  if (h->struct_size < DDPH_HOOK_SIZE_V1_5 || h->check == nullptr)
    return {Status::kSkip, "no check() (optional; ABI 1.5)"};
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  note("check with default options");
  const std::string why = check_with_defaults(h->check, h->options, h->num_options);
  if (!why.empty()) return fail(why);
  return pass("defaults accepted");
}

Outcome check_create_destroy(const ddph_hook_t* h, double) {
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  {
    note("create with default options");
    Instance warm(h, self_comm());
    if (!warm.ok()) return fail("create with default options failed: " + warm.error());
    note("destroy");
  }
  note("100 create/destroy cycles");
  const size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 100; ++i) {
    Instance inst(h, self_comm());
    if (!inst.ok()) return fail("create #" + std::to_string(i + 2) + " failed: " + inst.error());
  }
  const size_t after = mallinfo2().uordblks;
  if (after > before && after - before > 16 * 1024)
    return fail("the heap grew by " + std::to_string(after - before) +
                " bytes over 100 create/destroy cycles");
  return pass("101 cycles, no heap growth");
}

Outcome expect_invalid(ddph_error_t* e, const char* what, const char* must_mention = nullptr) {
  if (e == nullptr) return fail(std::string(what) + " was accepted");
  const ddph_code_t code = ddph_error_code(e);
  const std::string msg = ddph_error_message(e);
  ddph_error_free(e);
  if (code != DDPH_INVALID_ARGUMENT)
    return fail(std::string(what) + " gave " + code_text(code) + ", want DDPH_INVALID_ARGUMENT");
  if (must_mention != nullptr && msg.find(must_mention) == std::string::npos)
    return fail(std::string(what) + ": the message '" + msg + "' does not name '" + must_mention +
                "'");
  return pass();
}

Outcome check_create_misuse(const ddph_hook_t* h, double) {
  void* state = nullptr;
  note("create(NULL init)");
  Outcome o = expect_invalid(h->create(nullptr, &state), "create(NULL init)");
  if (o.status != Status::kPass) return o;
  ddph_hook_init_t init{};
  note("create with init.struct_size 0");
  o = expect_invalid(h->create(&init, &state), "create with init.struct_size 0");
  if (o.status != Status::kPass) return o;
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.comm = nullptr;
  note("create with init.comm NULL");
  o = expect_invalid(h->create(&init, &state), "create with init.comm NULL", "comm");
  if (o.status != Status::kPass) return o;
  if (h->stats != nullptr && required_option(h).empty()) {
    Instance inst(h, self_comm());
    if (!inst.ok()) return fail("create with default options failed: " + inst.error());
    ddph_stats_t st{};
    st.struct_size = 3;
    note("stats with struct_size 3");
    o = expect_invalid(h->stats(inst.state(), &st), "stats with struct_size 3");
    if (o.status != Status::kPass) return o;
  }
  return pass("NULL init, struct_size 0, NULL comm refused");
}

// Two steps of an n-element bucket, each completed exactly once, successfully.
Outcome check_run(const ddph_hook_t* h, int64_t n, double wait_s) {
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  Instance inst(h, self_comm());
  if (!inst.ok()) return fail("create with default options failed: " + inst.error());
  for (uint64_t step = 0; step < 2; ++step) {
    TestBucket b(n, step);
    note("run_bucket, step " + std::to_string(step));
    RunResult r = run_once(h, inst.state(), &b.b, wait_s);
    const std::string at = "step " + std::to_string(step) + ": ";
    if (!r.problem.empty()) return fail(at + r.problem);
    if (r.returned_error)
      return fail(at + "run_bucket refused it: " + code_text(r.code) + ": " + r.message);
    if (r.code != DDPH_OK)
      return fail(at + "completed with " + code_text(r.code) + ": " + r.message);
  }
  return pass("2 steps, done once each");
}

Outcome check_run_0(const ddph_hook_t* h, double w) {
  return check_run(h, 0, w);
}
Outcome check_run_1(const ddph_hook_t* h, double w) {
  return check_run(h, 1, w);
}
Outcome check_run_1000(const ddph_hook_t* h, double w) {
  return check_run(h, 1000, w);
}

// Where the hook's result lands.
const float* result_of(const ddph_hook_t* h, TestBucket& b) {
  return (h->flags & DDPH_HOOK_RESULT_ELSEWHERE) ? b.param_data.data() : b.data.data();
}

std::string describe(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", double(v));
  return text;
}

// NaN, +Inf and -Inf at three positions: either DDPH_NONFINITE, or each comes
// back non-finite with IEEE's sign (an Inf may turn NaN where the hook mixes
// elements) and every other position equals the clean run's, plain
// allreduce's, or is non-finite. Finite garbage is the one wrong answer.
Outcome check_nonfinite(const ddph_hook_t* h, double wait_s) {
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  constexpr int64_t n = 1000;
  const int64_t at[3] = {3, 500, 999};
  const float bad[3] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  Instance clean_inst(h, self_comm()), bad_inst(h, self_comm());
  if (!clean_inst.ok()) return fail("create with default options failed: " + clean_inst.error());
  TestBucket clean(n, 0), dirty(n, 0);
  for (int k = 0; k < 3; ++k) dirty.data[size_t(at[k])] = bad[k];
  note("run_bucket on the clean bucket");
  RunResult rc = run_once(h, clean_inst.state(), &clean.b, wait_s);
  if (!rc.problem.empty() || rc.returned_error || rc.code != DDPH_OK)
    return fail("the clean bucket did not run: " + (rc.problem.empty() ? rc.message : rc.problem));
  const std::vector<float> input = dirty.data;
  note("run_bucket on the bucket holding NaN, +Inf and -Inf");
  RunResult rb = run_once(h, bad_inst.state(), &dirty.b, wait_s);
  if (!rb.problem.empty()) return fail(rb.problem);
  if (rb.returned_error || rb.code != DDPH_OK) {
    if (rb.code == DDPH_NONFINITE) return pass("reported: " + rb.message);
    return fail("failed with " + code_text(rb.code) +
                " (want success or DDPH_NONFINITE): " + rb.message);
  }
  const float* want = result_of(h, clean);
  const float* got = result_of(h, dirty);
  int spread = 0;
  for (int k = 0; k < 3; ++k) {
    const float g = got[at[k]];
    const bool ok = std::isnan(bad[k]) ? std::isnan(g) : (std::isnan(g) || g == bad[k]);
    if (!ok)
      return fail("input " + describe(bad[k]) + " at [" + std::to_string(at[k]) + "] came back " +
                  describe(g));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (i == at[0] || i == at[1] || i == at[2]) continue;
    if (!std::isfinite(got[i])) {
      ++spread;
      continue;
    }
    // On a world of one, plain allreduce returns the input: a hook may fall
    // back to it for a bucket holding NaN/Inf (quantization does).
    const float plain = input[size_t(i)];
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && got[i] != plain)
      return fail("finite garbage: [" + std::to_string(i) + "] is " + describe(got[i]) +
                  ", the clean run gives " + describe(want[i]) + " and plain allreduce " +
                  describe(plain));
  }
  return pass(spread == 0 ? "propagated elementwise, other positions unchanged"
                          : "propagated; " + std::to_string(spread) +
                                " other positions non-finite too (the hook mixes elements)");
}

Outcome check_misuse(const ddph_hook_t* h, double wait_s) {
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  Instance inst(h, self_comm());
  if (!inst.ok()) return fail("create with default options failed: " + inst.error());
  struct Case {
    const char* what;
    void (*spoil)(TestBucket&);
  };
  static const Case cases[] = {
      {"struct_size 0", [](TestBucket& t) { t.b.struct_size = 0; }},
      {"2-D buffer", [](TestBucket& t) { t.b.buffer.ndim = 2; }},
      {"NULL buffer data", [](TestBucket& t) { t.b.buffer.data = nullptr; }},
      {"negative length", [](TestBucket& t) { t.shape[0] = -5; }},
      {"complex64 dtype",
       [](TestBucket& t) {
         t.b.buffer.dtype = {kDLComplex, 64, 1};
       }},
      {"float32x4 (lanes 4) dtype",
       [](TestBucket& t) {
         t.b.buffer.dtype = {kDLFloat, 32, 4};
       }},
      {"param view past the buffer", [](TestBucket& t) { t.param.offset = 60; }},
      {"overflowing param shape",
       [](TestBucket& t) { t.param_shape[0] = t.param_shape[1] = int64_t(1) << 40; }},
      {"num_params 1 with NULL params", [](TestBucket& t) { t.b.params = nullptr; }},
  };
  auto refused = [&](void* state, const ddph_bucket_t* b, bool null_done,
                     const std::string& what) -> std::string {
    note("run_bucket with " + what);
    RunResult r = run_once(h, state, b, wait_s, null_done);
    if (!r.problem.empty()) return what + ": " + r.problem;
    if (!r.returned_error) return what + " was accepted (done got " + code_text(r.code) + ")";
    if (r.code != DDPH_INVALID_ARGUMENT && r.code != DDPH_UNSUPPORTED)
      return what + " gave " + code_text(r.code) + ", want INVALID_ARGUMENT or UNSUPPORTED";
    if (r.message.size() < 10) return what + ": the message '" + r.message + "' names nothing";
    return "";
  };
  TestBucket good(64, 0);
  std::string why = refused(nullptr, &good.b, false, "NULL state");
  if (why.empty()) why = refused(inst.state(), nullptr, false, "NULL bucket");
  if (why.empty()) why = refused(inst.state(), &good.b, true, "NULL done");
  for (const Case& c : cases) {
    if (!why.empty()) break;
    TestBucket t(64, 0);
    c.spoil(t);
    why = refused(inst.state(), &t.b, false, c.what);
  }
  if (!why.empty()) return fail(why);
  return pass(std::to_string(3 + sizeof cases / sizeof cases[0]) +
              " misuses refused, done not called");
}

void append(void* sink, const void* bytes, size_t n) {
  static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
}

Outcome check_state(const ddph_hook_t* h, double wait_s) {
  if (h->save_state == nullptr) return {Status::kSkip, "no save_state/load_state"};
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  Instance a(h, self_comm()), b(h, self_comm());
  if (!a.ok()) return fail("create with default options failed: " + a.error());
  TestBucket bucket(1000, 0);
  note("run_bucket before saving");
  RunResult r = run_once(h, a.state(), &bucket.b, wait_s);
  if (!r.problem.empty() || r.returned_error || r.code != DDPH_OK)
    return fail("the bucket before saving did not run: " +
                (r.problem.empty() ? r.message : r.problem));
  std::string blob, again;
  note("save_state");
  if (ddph_error_t* e = h->save_state(a.state(), append, &blob)) {
    std::string m = ddph_error_message(e);
    ddph_error_free(e);
    return fail("save_state failed: " + m);
  }
  note("load_state of its own blob");
  if (ddph_error_t* e = h->load_state(b.state(), blob.data(), blob.size())) {
    std::string m = ddph_error_message(e);
    ddph_error_free(e);
    return fail("load_state refused its own blob: " + m);
  }
  if (ddph_error_t* e = h->save_state(b.state(), append, &again)) {
    std::string m = ddph_error_message(e);
    ddph_error_free(e);
    return fail("save_state after load_state failed: " + m);
  }
  if (again != blob) return fail("save -> load -> save gave a different blob");
  if (blob.empty()) return pass("empty state round trips");
  for (size_t cut : {blob.size() - 1, blob.size() / 2}) {
    note("load_state of the blob cut to " + std::to_string(cut) + " bytes");
    ddph_error_t* e = h->load_state(b.state(), blob.data(), cut);
    if (e == nullptr)
      return fail("load_state accepted the blob truncated to " + std::to_string(cut) + " of " +
                  std::to_string(blob.size()) + " bytes");
    ddph_error_free(e);
  }
  return pass(std::to_string(blob.size()) + "-byte blob round trips; truncated ones refused");
}

// ABI 1.10: take_residual of a bucket index the state never reduced, and a
// second take of one it did, leave the buffer bit for bit; NULL state and
// bucket are refused, never a crash.
Outcome check_take_residual(const ddph_hook_t* h, double wait_s) {
  if (h->struct_size < DDPH_HOOK_SIZE_V1_10 || h->take_residual == nullptr)
    return {Status::kSkip, "no take_residual"};
  Outcome skip;
  if (needs_options(h, &skip)) return skip;
  Instance a(h, self_comm());
  if (!a.ok()) return fail("create with default options failed: " + a.error());
  TestBucket bucket(1000, 0);
  note("run_bucket before take_residual");
  RunResult r = run_once(h, a.state(), &bucket.b, wait_s);
  if (!r.problem.empty() || r.returned_error || r.code != DDPH_OK)
    return fail("the bucket did not run: " + (r.problem.empty() ? r.message : r.problem));
  auto unchanged = [&](uint64_t index, const char* what) -> std::string {
    TestBucket t(1000, 1);
    t.b.index = index;
    for (int64_t i = 0; i < t.n; ++i) t.values()[i] = float(i % 7) - 3.0f;
    const std::vector<float> before(t.values(), t.values() + t.n);
    note(what);
    if (ddph_error_t* e = h->take_residual(a.state(), &t.b)) {
      std::string m = ddph_error_message(e);
      ddph_error_free(e);
      return std::string(what) + " failed: " + m;
    }
    return std::equal(before.begin(), before.end(), t.values())
               ? ""
               : std::string(what) + " changed the buffer";
  };
  if (std::string why = unchanged(bucket.b.index + 1000, "take_residual of an unseen index");
      !why.empty())
    return fail(why);
  TestBucket first(1000, 1);
  first.b.index = bucket.b.index;
  note("take_residual of the bucket's index");
  if (ddph_error_t* e = h->take_residual(a.state(), &first.b)) {
    std::string m = ddph_error_message(e);
    ddph_error_free(e);
    return fail("take_residual of the bucket's index failed: " + m);
  }
  if (std::string why = unchanged(bucket.b.index, "a second take_residual"); !why.empty())
    return fail(why);
  note("take_residual(NULL state)");
  if (Outcome o = expect_invalid(h->take_residual(nullptr, &first.b), "take_residual(NULL state)");
      o.status != Status::kPass)
    return o;
  note("take_residual(NULL bucket)");
  if (Outcome o =
          expect_invalid(h->take_residual(a.state(), nullptr), "take_residual(NULL bucket)");
      o.status != Status::kPass)
    return o;
  return pass("an unseen index and a second take leave the bucket; NULLs refused");
}

}  // namespace

const std::vector<HookCheck>& hook_checks() {
  static const std::vector<HookCheck> checks = {
      {"hook_table", check_table},
      {"option_check", check_option_check},
      {"create_destroy", check_create_destroy},
      {"create_misuse", check_create_misuse},
      {"run_bucket n=0", check_run_0},
      {"run_bucket n=1", check_run_1},
      {"run_bucket n=1000", check_run_1000},
      {"nonfinite", check_nonfinite},
      {"bucket_misuse", check_misuse},
      {"state_round_trip", check_state},
      {"take_residual", check_take_residual},
  };
  return checks;
}

}  // namespace ddph::plugin_checks
