// Talking to comm_mpi from tests that run as MPI ranks under mpirun: the
// factory, making a communicator, typed tensors, and errors as (code,
// message). Every process of the job runs the same tests.
#pragma once

#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/comm_tensors.h"

namespace comm_mpi_test {

// dlopens libddph_comm_mpi.so once per process, as the loader does
// (RTLD_LOCAL); aborts with a message if it cannot.
const ddph_comm_factory_t* factory();

// This process's rank and the job's size, from the launcher's environment
// (so that tests need not call MPI themselves).
int job_rank();
int job_size();

// An error taken out of its C object (which is freed).
struct Err {
  ddph_code_t code = DDPH_OK;
  std::string message;
  bool ok() const { return code == DDPH_OK; }
  std::string text() const;  // "6: message" for diagnostics
};
Err take(ddph_error_t* e);

// factory()->create as rank/world (default: the job's); NULL and *err on failure.
ddph_comm_t* make_comm(Err* err, int64_t timeout_ms = 20000, int rank = -1, int world = -1);

// A communicator of the whole job, made for each test and destroyed after.
struct CommFixture : ::testing::Test {
  void SetUp() override {
    Err err;
    comm = make_comm(&err);
    ASSERT_NE(comm, nullptr) << err.text();
    rank = comm->rank(comm->ctx);
    world = comm->size(comm->ctx);
  }
  void TearDown() override {
    if (comm != nullptr) comm->destroy(comm->ctx);
  }
  ddph_comm_t* comm = nullptr;
  int rank = 0, world = 1;
};

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

}  // namespace comm_mpi_test

// Asserts that a comm call returned no error, printing its text if it did.
#define EXPECT_CALL_OK(call)                               \
  do {                                                     \
    ::comm_mpi_test::Err e_ = ::comm_mpi_test::take(call); \
    ASSERT_TRUE(e_.ok()) << #call << ": " << e_.text();    \
  } while (0)
