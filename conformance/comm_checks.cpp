#include "conformance/comm_checks.h"

#include <stdlib.h>

#include <cstring>
#include <string>
#include <vector>

#include "conformance/harness.h"
#include "core/base/options.h"

namespace ddph::plugin_checks {
namespace {

Outcome fail(std::string detail) {
  return {Status::kFail, std::move(detail)};
}

// The error's text (freed), or "" for success.
std::string failed(ddph_error_t* e) {
  if (e == nullptr) return "";
  std::string m = code_text(ddph_error_code(e)) + ": " + ddph_error_message(e);
  ddph_error_free(e);
  return m;
}

struct F32 {
  explicit F32(std::vector<float> v) : values(std::move(v)) {
    shape = int64_t(values.size());
    t.data = values.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = &shape;
  }
  std::vector<float> values;
  int64_t shape;
  DLTensor t{};
};

const std::vector<float> kInput = {1.5f, -2.0f, 0.0f, 1e30f, -3.25f};

// Every collective of a world of one returns its input.
std::string collectives(ddph_comm_t* c) {
  if (c->rank == nullptr || c->size == nullptr) return "rank or size is NULL";
  if (c->rank(c->ctx) != 0 || c->size(c->ctx) != 1)
    return "rank " + std::to_string(c->rank(c->ctx)) + " of " + std::to_string(c->size(c->ctx)) +
           ", want 0 of 1";
  if (!c->allreduce || !c->allgather || !c->reduce_scatter || !c->broadcast || !c->barrier)
    return "allreduce, allgather, reduce_scatter, broadcast and barrier are required";
  const char* op_names[] = {"SUM", "AVG", "MAX", "MIN"};
  for (int op = DDPH_SUM; op <= DDPH_MIN; ++op) {
    F32 in(kInput), out(std::vector<float>(kInput.size(), 7.0f));
    note(std::string("allreduce ") + op_names[op]);
    std::string e = failed(c->allreduce(c->ctx, &in.t, &out.t, ddph_reduce_op_t(op), nullptr));
    if (!e.empty()) return std::string("allreduce ") + op_names[op] + ": " + e;
    if (out.values != kInput)
      return std::string("allreduce ") + op_names[op] + " changed the values";
    e = failed(c->allreduce(c->ctx, &in.t, &in.t, ddph_reduce_op_t(op), nullptr));
    if (!e.empty()) return std::string("in-place allreduce ") + op_names[op] + ": " + e;
    if (in.values != kInput)
      return std::string("in-place allreduce ") + op_names[op] + " changed the values";
  }
  {
    F32 in(kInput), out(std::vector<float>(kInput.size(), 7.0f));
    note("allgather");
    std::string e = failed(c->allgather(c->ctx, &in.t, &out.t, nullptr));
    if (!e.empty()) return "allgather: " + e;
    if (out.values != kInput) return "allgather changed the values";
    note("reduce_scatter");
    e = failed(c->reduce_scatter(c->ctx, &in.t, &out.t, DDPH_SUM, nullptr));
    if (!e.empty()) return "reduce_scatter: " + e;
    if (out.values != kInput) return "reduce_scatter changed the values";
    note("broadcast");
    e = failed(c->broadcast(c->ctx, &in.t, 0, nullptr));
    if (!e.empty()) return "broadcast: " + e;
    if (in.values != kInput) return "broadcast changed the values";
    note("barrier");
    e = failed(c->barrier(c->ctx));
    if (!e.empty()) return "barrier: " + e;
  }
  if (c->struct_size >= DDPH_COMM_SIZE_V1_1 && c->alltoallv != nullptr) {
    F32 in(kInput), out(std::vector<float>(kInput.size(), 7.0f));
    const int64_t counts[1] = {int64_t(kInput.size())};
    note("alltoallv");
    std::string e = failed(c->alltoallv(c->ctx, &in.t, counts, &out.t, counts, nullptr));
    if (!e.empty()) return "alltoallv: " + e;
    if (out.values != kInput) return "alltoallv changed the values";
  }
  if (c->split != nullptr) {
    ddph_comm_t* sub = nullptr;
    note("split(0, 0)");
    std::string e = failed(c->split(c->ctx, 0, 0, &sub));
    if (!e.empty()) return "split(0, 0): " + e;
    if (sub == nullptr) return "split(0, 0) gave no communicator";
    F32 in(kInput), out(std::vector<float>(kInput.size(), 7.0f));
    e = failed(sub->allreduce(sub->ctx, &in.t, &out.t, DDPH_SUM, nullptr));
    const bool same = out.values == kInput;
    sub->destroy(sub->ctx);
    if (!e.empty()) return "allreduce on split(0, 0): " + e;
    if (!same) return "allreduce on split(0, 0) changed the values";
    sub = reinterpret_cast<ddph_comm_t*>(&in);  // must be overwritten with NULL
    e = failed(c->split(c->ctx, -1, 0, &sub));
    if (!e.empty()) return "split(-1, 0): " + e;
    if (sub != nullptr) return "split with a negative color must set *out to NULL";
  }
  if (c->bytes_sent != nullptr) (void)c->bytes_sent(c->ctx);
  return "";
}

}  // namespace

Outcome check_comm_table(const ddph_comm_factory_t* f) {
  if (f == nullptr) return fail("comms[] entry is NULL");
  if (f->struct_size < DDPH_COMM_FACTORY_SIZE_V1_0)
    return fail("struct_size " + std::to_string(f->struct_size) + " < DDPH_COMM_FACTORY_SIZE_V1_0");
  if (f->backend == nullptr || f->backend[0] == '\0') return fail("backend is NULL or empty");
  if (f->create == nullptr) return fail("create is NULL");
  if (f->num_options > 0 && f->options == nullptr)
    return fail("num_options > 0 but options is NULL");
  try {
    ddph::resolve_options(f->options, f->num_options, {});
  } catch (const std::exception& e) {
    return fail(std::string("a default is invalid: ") + e.what());
  }
  // ABI 1.5: a factory that offers check() accepts its own defaults.
  if (f->struct_size >= DDPH_COMM_FACTORY_SIZE_V1_5 && f->check != nullptr) {
    const std::string why = check_with_defaults(f->check, f->options, f->num_options);
    if (!why.empty()) return fail(why);
  }
  ddph_comm_t* out = nullptr;
  ddph_error_t* e = f->create(nullptr, &out);
  if (e == nullptr) return fail("create(NULL) was accepted");
  if (ddph_error_code(e) != DDPH_INVALID_ARGUMENT)
    return fail("create(NULL) gave " + failed(e) + ", want DDPH_INVALID_ARGUMENT");
  ddph_error_free(e);
  ddph_comm_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.rank = 5;
  init.world_size = 2;
  init.rendezvous = "file:///nonexistent/ddph-validate-plugin";
  init.prefix = "validate";
  init.timeout_ms = 1000;
  e = f->create(&init, &out);
  if (e == nullptr) return fail("rank 5 of a world of 2 was accepted");
  const std::string msg = ddph_error_message(e);
  const ddph_code_t code = ddph_error_code(e);
  ddph_error_free(e);
  if (code != DDPH_INVALID_ARGUMENT || msg.find("rank") == std::string::npos)
    return fail("rank 5 of 2 gave " + code_text(code) + " '" + msg +
                "', want DDPH_INVALID_ARGUMENT naming the rank");
  return {Status::kPass, "create(NULL) and rank 5 of 2 refused"};
}

Outcome check_comm_collectives(const ddph_comm_factory_t* f, double timeout_s) {
  ddph::OptionList opts;
  try {
    opts = ddph::resolve_options(f->options, f->num_options, {});
  } catch (const std::exception& e) {
    return fail(std::string("default options do not resolve: ") + e.what());
  }
  char dir[] = "/tmp/ddph-validate-XXXXXX";
  if (mkdtemp(dir) == nullptr) return fail("mkdtemp failed");
  const std::string rendezvous = std::string("file://") + dir;
  ddph_comm_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.rank = 0;
  init.world_size = 1;
  init.rendezvous = rendezvous.c_str();
  init.prefix = "validate";
  init.timeout_ms = int64_t(timeout_s * 1000 / 2);
  init.options = opts.data();
  init.num_options = opts.size();
  ddph_comm_t* c = nullptr;
  note("create on a world of 1 (" + rendezvous + ")");
  ddph_error_t* made = f->create(&init, &c);
  // DDPH_UNSUPPORTED from create means "not on this machine" (comm_nccl
  // without a GPU): nothing to check here, which is not a failure.
  const bool cannot_run_here = ddph_error_code(made) == DDPH_UNSUPPORTED;
  std::string e = failed(made);
  if (cannot_run_here) {
    const std::string rm = std::string("rm -rf '") + dir + "'";
    if (std::system(rm.c_str()) != 0) e += " (and could not remove the rendezvous dir)";
    return {Status::kSkip, "cannot run on this machine: " + e};
  }
  std::string why = !e.empty()     ? "create on a world of 1 (" + rendezvous + "): " + e
                    : c == nullptr ? "create succeeded but gave no communicator"
                                   : collectives(c);
  if (c != nullptr && c->destroy != nullptr) c->destroy(c->ctx);
  const std::string rm = std::string("rm -rf '") + dir + "'";
  if (std::system(rm.c_str()) != 0)
    why += why.empty() ? "" : " (and could not remove the rendezvous dir)";
  if (!why.empty()) return fail(why);
  return {Status::kPass,
          "world of 1: allreduce (4 ops), allgather, reduce_scatter, broadcast, "
          "barrier and the optional ones offered"};
}

}  // namespace ddph::plugin_checks
