// Loading comm_gloo and talking to it from tests: the factory, connecting a
// rank, typed tensors, and errors as (code, message).
#pragma once

#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/comm_tensors.h"
#include "tests/support/multiprocess.h"

// Inside a rank's body (where `rank` is in scope): the call must succeed,
// or the child fails naming the call and the error.
#define CHILD_OK(call)                                                              \
  do {                                                                              \
    ::comm_gloo_test::Err e_ = ::comm_gloo_test::take(call);                        \
    DDPH_CHILD_CHECK(e_.ok(), "rank %d: %s -> %s", rank, #call, e_.text().c_str()); \
  } while (0)

namespace comm_gloo_test {

// dlopens libddph_comm_gloo.so once per process; aborts the test process
// with a message if it cannot.
const ddph_plugin_t* plugin();
ddph_plugin_entry_fn plugin_entry();
const ddph_comm_factory_t* factory();

// An error taken out of its C object (which is freed).
struct Err {
  ddph_code_t code = DDPH_OK;
  std::string message;
  bool ok() const { return code == DDPH_OK; }
  std::string text() const;  // "DDPH_TIMEOUT: message" for diagnostics
};
Err take(ddph_error_t* e);

struct Connect {
  int rank = 0;
  int world = 1;
  std::string rendezvous;  // "file://..." etc.; ignored when store is set
  const ddph_store_t* store = nullptr;
  std::string prefix = "test";
  int64_t timeout_ms = 2000;
};

// Calls factory()->create; on failure returns NULL and fills *err.
ddph_comm_t* connect(const Connect& c, Err* err);
std::string file_url(const std::string& dir);
// connect() with the defaults and a file store under dir; NULL (after
// printing why) on failure. timeout_ms: the collectives' (2 s by default,
// which the fault tests wait for).
ddph_comm_t* must_connect(int rank, int world, const std::string& dir,
                          int64_t timeout_ms = Connect{}.timeout_ms);

// Names a test over world sizes "2ranks", "3ranks", ...
inline std::string world_name(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

// Typed host tensors, shared with the other communicators' tests.
using ddph_test::get;
using ddph_test::kBF16;
using ddph_test::kF16;
using ddph_test::kF32;
using ddph_test::kF64;
using ddph_test::kI32;
using ddph_test::kI64;
using ddph_test::kI8;
using ddph_test::kU8;
using ddph_test::now_s;
using ddph_test::seconds_since;
using ddph_test::set;
using ddph_test::Tensor;
using ddph_test::view;

}  // namespace comm_gloo_test
