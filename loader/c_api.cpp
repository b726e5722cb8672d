// The ddph_session_* entry points: argument checks and ddph::guard around the
// C++ Session, so that no exception crosses the ABI.
#include <ddph/ddph.h>

#include "core/base/error.h"
#include "core/base/host.h"
#include "loader/host_table.h"
#include "loader/session/session.h"

struct ddph_session {
  std::unique_ptr<ddph::loader::Session> impl;
};

namespace {

// Installs the loader's host table before any core helper makes an error.
template <class Body>
ddph_error_t* api_guard(Body&& body) noexcept {
  ddph::loader::install_loader_host();
  return ddph::guard(std::forward<Body>(body));
}

ddph::loader::Session& session_of(ddph_session_t* s, const char* function) {
  DDPH_CHECK(s != nullptr && s->impl != nullptr, DDPH_INVALID_ARGUMENT,
             function << ": session is NULL");
  return *s->impl;
}

// The record the caller hands in to be filled: not NULL, and at least the
// size of the ABI version that introduced it (`version`, e.g. "v1.0").
template <class Record>
void check_out(const char* function, const Record* out, size_t min_size, const char* version) {
  DDPH_CHECK(out != nullptr, DDPH_INVALID_ARGUMENT, function << ": out is NULL");
  DDPH_CHECK(out->struct_size >= min_size, DDPH_INVALID_ARGUMENT,
             function << ": out->struct_size is " << out->struct_size << ", smaller than the "
                      << version << " size " << min_size);
}

// ddph_session_take_metrics and _take_spans: *taken is 1 when take(out)
// filled *out, 0 when there was nothing to take or an argument was wrong.
template <class Record, class Take>
void take_one(const char* function, const Record* out, int32_t* taken, size_t min_size,
              const char* version, Take take) {
  DDPH_CHECK(taken != nullptr, DDPH_INVALID_ARGUMENT, function << ": taken is NULL");
  *taken = 0;
  check_out(function, out, min_size, version);
  *taken = take() ? 1 : 0;
}

}  // namespace

extern "C" {

ddph_error_t* ddph_session_open(const ddph_session_options_t* opts, ddph_session_t** out) {
  return api_guard([&] {
    DDPH_CHECK(out != nullptr, DDPH_INVALID_ARGUMENT, "ddph_session_open: out is NULL");
    *out = nullptr;
    DDPH_CHECK(opts != nullptr, DDPH_INVALID_ARGUMENT, "ddph_session_open: opts is NULL");
    DDPH_CHECK(opts->struct_size >= DDPH_SESSION_OPTIONS_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
               "ddph_session_options.struct_size is " << opts->struct_size
                                                      << ", smaller than the v1.0 size "
                                                      << DDPH_SESSION_OPTIONS_SIZE_V1_0);
    auto session = std::make_unique<ddph_session>();
    session->impl = std::make_unique<ddph::loader::Session>(*opts);
    *out = session.release();
  });
}

ddph_error_t* ddph_session_submit(ddph_session_t* s, const ddph_bucket_t* bucket, ddph_done_fn done,
                                  void* user) {
  return api_guard([&] { session_of(s, "ddph_session_submit").submit(bucket, done, user); });
}

ddph_error_t* ddph_session_flush(ddph_session_t* s) {
  ddph_error_t* first = nullptr;
  ddph_error_t* error = api_guard([&] { first = session_of(s, "ddph_session_flush").flush(); });
  return error != nullptr ? error : first;
}

ddph_error_t* ddph_session_stats(ddph_session_t* s, ddph_stats_t* out) {
  return api_guard([&] {
    auto& session = session_of(s, "ddph_session_stats");
    check_out("ddph_session_stats", out, DDPH_STATS_SIZE_V1_0, "v1.0");
    session.stats(out);
  });
}

ddph_error_t* ddph_session_take_metrics(ddph_session_t* s, ddph_bucket_metrics_t* out,
                                        int32_t* taken) {
  return api_guard([&] {
    auto& session = session_of(s, "ddph_session_take_metrics");
    take_one("ddph_session_take_metrics", out, taken, DDPH_BUCKET_METRICS_SIZE_V1_5, "v1.5",
             [&] { return session.take_metrics(out); });
  });
}

ddph_error_t* ddph_session_take_spans(ddph_session_t* s, ddph_span_t* out, int32_t* taken) {
  return api_guard([&] {
    auto& session = session_of(s, "ddph_session_take_spans");
    take_one("ddph_session_take_spans", out, taken, DDPH_SPAN_SIZE_V1_7, "v1.7",
             [&] { return session.take_spans(out); });
  });
}

ddph_error_t* ddph_session_save_state(ddph_session_t* s, ddph_write_fn write, void* sink) {
  return api_guard([&] { session_of(s, "ddph_session_save_state").save_state(write, sink); });
}

ddph_error_t* ddph_session_load_state(ddph_session_t* s, const void* bytes, size_t n) {
  return api_guard([&] {
    auto& session = session_of(s, "ddph_session_load_state");
    DDPH_CHECK(bytes != nullptr || n == 0, DDPH_INVALID_ARGUMENT,
               "ddph_session_load_state: bytes is NULL for " << n << " bytes");
    session.load_state(bytes, n);
  });
}

ddph_comm_t* ddph_session_comm(ddph_session_t* s) {
  return (s != nullptr && s->impl != nullptr) ? s->impl->comm() : nullptr;
}

void ddph_session_close(ddph_session_t* s) {
  if (s == nullptr) return;
  try {
    // close returns nothing to refuse with: the line says why it did not.
    if (s->impl != nullptr && s->impl->on_own_thread()) {
      ddph::log(DDPH_LOG_ERROR, "loader",
                "ddph_session_close: called from the session's own thread (a done callback, or a "
                "log sink called while a hook runs): the close would wait for itself, so the "
                "session stays open; close it from another thread");
      return;
    }
    delete s;
  } catch (...) {
    // Destructors do not throw by design; never let anything cross the ABI.
  }
}

}  // extern "C"
