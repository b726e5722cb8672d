// The zero hooks' CUDA path against their CPU path. Each rank steps the
// same values twice: in buckets on GPU 0 and in host buckets, through two
// sessions of the same hook. Worlds of 2 and 3 run over Gloo, which stages
// CUDA buffers through host memory (real processes sharing the one GPU), so
// the reduce-scatter, allgather, broadcasts, kept gradients and the
// quantized exchange all cross ranks; a world of one runs over NCCL. After
// every step each rank's GPU parameters have the bits of its host
// parameters and the ranks agree; the shards saved from the GPU are the
// CPU's bytes but for the run id; and a fresh GPU session that loads the
// CPU's shard after step 3 continues as the CPU run does (with bits 8 and
// 4 the shard brings the error-feedback residuals along). Skips with one
// line without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/optim/functional_optim.h"
#include "plugins/zero/shard_state.h"
#include "tests/support/cuda_device.h"
#include "tests/support/gpu_lent_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::LentBucket;
using ddph_test::same_bits;

constexpr uint64_t kSteps = 6, kResumeAt = 3;

struct Case {
  const char* name;
  const char* hook;
  const char* options;
  int world;
  const char* backend;  // of the GPU session; the CPU session runs Gloo
  // Bucket 1 on a second stream: zero_step then orders the kept bucket 0's
  // stream before it, and it after.
  bool two_streams = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

std::string yaml(const char* backend, const Case& c) {
  return std::string("comm: {backend: ") + backend +
         ", timeout: 60s}\nhook: {family: zero, name: " + c.hook + ", options: {" + c.options +
         "}, wrap: {family: default, name: allreduce}}\n";
}

// The optimizer the case's options name.
ddph::optim::OptimKind kind_of(const Case& c) {
  using ddph::optim::OptimKind;
  for (OptimKind k : {OptimKind::kSgd, OptimKind::kAdam, OptimKind::kAdamW})
    if (std::string(c.options).find(std::string("optimizer: ") + ddph::optim::optim_name(k) +
                                    ",") != std::string::npos)
      return k;
  ADD_FAILURE() << c.name << ": no optimizer in " << c.options;
  return OptimKind::kSgd;
}

// The zero shard in s's saved state with its run id set to 0, or "" and
// why in *error. The host and GPU sessions are two runs, each with a run id
// of its own (drawn at random, or taken from a loaded shard); everything
// else in their shards must be the same bytes.
std::string shard_but_run_id(ddph_session_t* s, const Case& c, std::string* error) {
  const std::string blob = ddph_test::hook_blob(ddph_test::session_state(s));
  try {
    ddph::zero::Shard shard =
        ddph::zero::decode_shard(blob.data(), blob.size(), kind_of(c), c.name);
    shard.run_id = 0;
    return ddph::zero::encode_shard(shard);
  } catch (const std::exception& e) {
    *error = e.what();
    return "";
  }
}

// Two buckets, 0 (parameters of 37 and 300 elements) and 1 (1000 and 5,
// the step's last): sizes no world divides, so the leftover elements and
// pieces cut inside a parameter are exercised.
struct Side {
  explicit Side(bool cuda) {
    b[0] = std::make_unique<LentBucket>(cuda, std::vector<size_t>{37, 300});
    b[1] = std::make_unique<LentBucket>(cuda, std::vector<size_t>{1000, 5});
    for (size_t k = 0; k < 2; ++k) b[k]->set_params(ddph_test::initial_params(k, b[k]->numel()));
  }
  // Steps once, bucket k on streams[k]; "" or the first error's text.
  std::string step(ddph_session_t* s, int rank, uint64_t step, const cudaStream_t* streams) {
    for (size_t k = 0; k < 2; ++k) {
      b[k]->set_grads(
          ddph_test::varied_gradients(step, double(k) + 0.71 * double(rank), b[k]->numel()));
      std::string message;
      if (ddph_test::run_bucket(s, b[k]->bucket(k, step, k == 1, streams[k]), &message) != DDPH_OK)
        return message.empty() ? "error" : message;
    }
    return "";
  }
  std::unique_ptr<LentBucket> b[2];
};

int body(const Case& c, int rank, int world, const std::string& dir) {
  DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (int k = 0; k < (c.two_streams ? 2 : 1); ++k)
    DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking) == cudaSuccess,
                     "rank %d: cudaStreamCreate", rank);
  if (!c.two_streams) streams[1] = streams[0];
  const cudaStream_t on_host[2] = {nullptr, nullptr};
  std::string error;
  ddph_session_t* cpu = ddph_test::open_session(yaml("gloo", c), rank, world, dir, &error);
  DDPH_CHILD_CHECK(cpu != nullptr, "%s rank %d: %s", c.name, rank, error.c_str());
  ddph_session_t* gpu = ddph_test::open_session(yaml(c.backend, c), rank, world, dir, &error);
  DDPH_CHILD_CHECK(gpu != nullptr, "%s rank %d: %s", c.name, rank, error.c_str());
  Side g(true), h(false);
  for (uint64_t step = 0; step < kSteps; ++step) {
    if (step == kResumeAt) {
      // The CPU's shard, saved before this step, carries on in a fresh GPU
      // session; the old one's shard must be the same bytes.
      const std::string blob = ddph_test::session_state(cpu);
      const std::string shard = shard_but_run_id(cpu, c, &error);
      DDPH_CHILD_CHECK(!shard.empty(), "%s rank %d: the CPU's shard: %s", c.name, rank,
                       error.c_str());
      DDPH_CHILD_CHECK(shard_but_run_id(gpu, c, &error) == shard,
                       "%s rank %d: the GPU's shard differs from the CPU's after %d steps%s%s",
                       c.name, rank, int(step), error.empty() ? "" : ": ", error.c_str());
      ddph_session_close(gpu);
      gpu = ddph_test::open_session(yaml(c.backend, c), rank, world, dir, &error);
      DDPH_CHILD_CHECK(gpu != nullptr, "%s rank %d: %s", c.name, rank, error.c_str());
      // With bits 8 or 4 it carries the CPU's error-feedback residuals too,
      // which the GPU session takes up to the device.
      ddph_error_t* e = ddph_session_load_state(gpu, blob.data(), blob.size());
      DDPH_CHILD_CHECK(e == nullptr, "%s rank %d: load: %s", c.name, rank, ddph_error_message(e));
    }
    const std::string host_error = h.step(cpu, rank, step, on_host);
    DDPH_CHILD_CHECK(host_error.empty(), "%s rank %d step %d: host: %s", c.name, rank, int(step),
                     host_error.c_str());
    const std::string on_gpu = g.step(gpu, rank, step, streams);
    DDPH_CHILD_CHECK(on_gpu.empty(), "%s rank %d step %d: GPU: %s", c.name, rank, int(step),
                     on_gpu.c_str());
    for (size_t k = 0; k < 2; ++k) {
      const std::vector<float> mine = g.b[k]->params();
      DDPH_CHILD_CHECK(same_bits(mine, h.b[k]->params()),
                       "%s rank %d step %d: bucket %d's parameters differ from the host's", c.name,
                       rank, int(step), int(k));
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(cpu, mine.data(), mine.size() * sizeof(float)),
                       "%s step %d: bucket %d differs across ranks", c.name, int(step), int(k));
    }
  }
  const std::string final_shard = shard_but_run_id(cpu, c, &error);
  DDPH_CHILD_CHECK(!final_shard.empty() && shard_but_run_id(gpu, c, &error) == final_shard,
                   "%s rank %d: the final shards differ%s%s", c.name, rank,
                   error.empty() ? "" : ": ", error.c_str());
  ddph_session_close(gpu);
  ddph_session_close(cpu);
  cudaStreamDestroy(streams[0]);
  if (c.two_streams) cudaStreamDestroy(streams[1]);
  return 0;
}

class ZeroGpu : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroGpu, GpuBucketsGiveTheCpuPathsBitsAndShards) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  const Case& c = GetParam();
  const auto results = ddph_test::run_ranks(
      c.world,
      [&](int rank, int world, const std::string& dir) { return body(c, rank, world, dir); }, 240);
  EXPECT_TRUE(ddph_test::all_passed(results)) << c.name << ": " << ddph_test::describe(results);
}

// zero_step keeps bucket 0 for the step's last bucket; a last bucket in
// other memory than the kept one is refused, naming the kept bucket.
TEST(ZeroGpuMisuse, AStepsBucketsInDifferentMemoryAreRefused) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  const Case c{"mixed", "zero_step", "optimizer: sgd, lr: 0.1, protocol: reduce_scatter", 1,
               "gloo"};
  const auto results = ddph_test::run_ranks(
      1,
      [&](int rank, int world, const std::string& dir) {
        DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
        std::string error;
        ddph_session_t* s = ddph_test::open_session(yaml("gloo", c), rank, world, dir, &error);
        DDPH_CHILD_CHECK(s != nullptr, "%s", error.c_str());
        LentBucket host(false, {37, 300}), gpu(true, {1000, 5});
        host.set_grads(ddph_test::varied_gradients(0, 0, host.numel()));
        gpu.set_grads(ddph_test::varied_gradients(0, 1, gpu.numel()));
        std::string message;
        DDPH_CHILD_CHECK(
            ddph_test::run_bucket(s, host.bucket(0, 0, false, nullptr), &message) == DDPH_OK,
            "host bucket: %s", message.c_str());
        const ddph_code_t code =
            ddph_test::run_bucket(s, gpu.bucket(1, 0, true, nullptr), &message);
        DDPH_CHILD_CHECK(code == DDPH_UNSUPPORTED &&
                             message.find("bucket 0 of step 0 is in other memory (host or GPU) "
                                          "than the step's last bucket") != std::string::npos,
                         "got %d: %s", int(code), message.c_str());
        ddph_session_close(s);
        return 0;
      },
      120);
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(
    Protocols, ZeroGpu,
    ::testing::Values(
        Case{"allreduce_adam_w2", "zero_step", "optimizer: adam, lr: 0.01, protocol: allreduce", 2,
             "gloo"},
        Case{"allreduce_shard_buckets_sgd_w3", "zero_step_interleaved",
             "optimizer: sgd, lr: 0.05, momentum: 0.9, protocol: allreduce, shard_buckets: true", 3,
             "gloo"},
        Case{"reduce_scatter_adamw_w3", "zero_step",
             "optimizer: adamw, lr: 0.01, weight_decay: 0.1, protocol: reduce_scatter", 3, "gloo"},
        Case{"reduce_scatter_nesterov_w2", "zero_step_interleaved",
             "optimizer: sgd, lr: 0.05, momentum: 0.9, nesterov: true, protocol: reduce_scatter", 2,
             "gloo"},
        Case{"bits8_adam_w3", "zero_step",
             "optimizer: adam, lr: 0.01, protocol: reduce_scatter, bits: 8", 3, "gloo"},
        Case{"bits4_adam_w2", "zero_step_interleaved",
             "optimizer: adam, lr: 0.01, protocol: reduce_scatter, bits: 4, channel_size: 64", 2,
             "gloo"},
        Case{"two_streams_reduce_scatter_adam_w2", "zero_step",
             "optimizer: adam, lr: 0.01, protocol: reduce_scatter", 2, "gloo", true},
        Case{"reduce_scatter_adam_nccl_w1", "zero_step",
             "optimizer: adam, lr: 0.01, amsgrad: true, protocol: reduce_scatter", 1, "nccl"},
        Case{"allreduce_sgd_nccl_w1", "zero_step_interleaved",
             "optimizer: sgd, lr: 0.05, momentum: 0.8, protocol: allreduce", 1, "nccl"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
