#include "tool/ranks/session.h"

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/comm/comm_call.h"

namespace ddph::tool {

SessionError::SessionError(ddph_code_t code, const std::string& message)
    : std::runtime_error(std::string(ddph::code_name(code)) + ": " + message), code_(code) {}

void check(ddph_error_t* error, const char* what) {
  if (error == nullptr) return;
  ddph_code_t code = ddph_error_code(error);
  std::string message = std::string(what) + ": " + ddph_error_message(error);
  ddph_error_free(error);
  throw SessionError(code, message);
}

Session::Session(const std::string& config_path, int rank, int world, const std::string& rendezvous,
                 const std::string& job) {
  ddph_session_options_t opts{};
  opts.struct_size = sizeof(opts);
  opts.yaml_path = config_path.c_str();
  opts.rank = rank;
  opts.world_size = world;
  opts.rendezvous = rendezvous.empty() ? nullptr : rendezvous.c_str();
  opts.job = job.empty() ? nullptr : job.c_str();
  check(ddph_session_open(&opts, &s_), "opening the session");
  // core's comm helpers turn C errors into exceptions through this table.
  if (ddph::host() == nullptr) ddph::set_host(ddph_host());
}

Session::~Session() {
  ddph_session_close(s_);
}

void Session::submit(const ddph_bucket_t* bucket) {
  auto done = [](void*, ddph_error_t* error) { ddph_error_free(error); };
  check(ddph_session_submit(s_, bucket, done, nullptr), "submitting a bucket");
}

void Session::flush() {
  check(ddph_session_flush(s_), "running the hook");
}

ddph_stats_t Session::stats() {
  ddph_stats_t st{};
  st.struct_size = sizeof(st);
  check(ddph_session_stats(s_, &st), "reading stats");
  return st;
}

uint64_t Session::state_bytes() {
  uint64_t n = 0;
  auto count = [](void* sink, const void*, size_t bytes) {
    *static_cast<uint64_t*>(sink) += bytes;
  };
  check(ddph_session_save_state(s_, count, &n), "saving the state");
  return n;
}

namespace {

// Every record a ddph_session_take_* call has (oldest first), until it says
// none is left.
template <class Record, class Take>
std::vector<Record> take_all(ddph_session_t* s, Take take, const char* what) {
  std::vector<Record> out;
  for (;;) {
    Record r{};
    r.struct_size = sizeof(r);
    int32_t taken = 0;
    check(take(s, &r, &taken), what);
    if (!taken) return out;
    out.push_back(r);
  }
}

}  // namespace

std::vector<ddph_span_t> Session::take_spans() {
  return take_all<ddph_span_t>(s_, ddph_session_take_spans, "reading phase spans");
}

std::vector<ddph_bucket_metrics_t> Session::take_metrics() {
  return take_all<ddph_bucket_metrics_t>(s_, ddph_session_take_metrics, "reading metrics");
}

ddph_comm_t* Session::comm() {
  return ddph_session_comm(s_);
}

namespace {
// core's collective helpers throw ddph::Error; the tool reports SessionError.
template <class Body>
void comm_call(const char* what, Body&& body) {
  try {
    body();
  } catch (const ddph::Error& e) {
    throw SessionError(e.code(), std::string(what) + ": " + e.what());
  }
}
}  // namespace

void Session::barrier() {
  comm_call("barrier", [&] { ddph::comm_barrier(comm()); });
}

void Session::allreduce(double* values, int64_t n, ddph_reduce_op_t op) {
  comm_call("allreduce of the tool's numbers", [&] {
    ddph::FlatTensor t(values, ddph::DType::F64, n);
    ddph::comm_allreduce(comm(), t, op, nullptr);
  });
}

void Session::allreduce(float* values, int64_t n, ddph_reduce_op_t op) {
  comm_call("raw allreduce", [&] {
    ddph::FlatTensor t(values, ddph::DType::F32, n);
    ddph::comm_allreduce(comm(), t, op, nullptr);
  });
}

void Session::allgather(const int64_t* values, int64_t n, int64_t* out) {
  comm_call("allgather of the tool's numbers", [&] {
    ddph::FlatTensor send(const_cast<int64_t*>(values), ddph::DType::I64, n);
    ddph::FlatTensor recv(out, ddph::DType::I64, n * ddph::comm_size(comm()));
    ddph::comm_allgather(comm(), send, recv, nullptr);
  });
}

}  // namespace ddph::tool
