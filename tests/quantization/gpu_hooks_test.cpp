// The quantization hooks on CUDA buckets: on a world of one GPU over NCCL,
// every (hook, protocol, bits, rounding, error feedback) combination gives
// the bits its CPU path gives over Gloo on the same bucket, step after step;
// their checkpoints are the same bytes, and a checkpoint moves from one to
// the other; a bucket holding NaN ends the same way in both (propagate and
// error), and so do buckets near FLT_MAX and under min_bytes. Without a GPU
// every test skips with one line.
//
// A world of one still runs the whole protocol (the codec, headers, the
// owner's requantization, the exchanges through NCCL), so any difference
// between the device and host halves of codec.h shows in the bits.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/quantization/hooks_ranks.h"
#include "tests/support/cuda_device.h"
#include "tests/support/gpu_cpu_sessions.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::DeviceVec;
using ddph_test::quant::hook_blob;
using ddph_test::quant::inputs;

std::string yaml(const char* backend, const std::string& hook, const std::string& options) {
  return std::string("comm: {backend: ") + backend +
         ", timeout: 20s}\nhook: {family: quantization, name: " + hook + ", options: {" + options +
         "}}\n";
}

// Same bits, except that two NaNs of any payload count as equal (x86 and the
// GPU make different NaNs; docs/cuda.md).
::testing::AssertionResult same_bits(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  if (gpu.size() != cpu.size())
    return ::testing::AssertionFailure() << "lengths " << gpu.size() << " and " << cpu.size();
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (std::isnan(gpu[i]) && std::isnan(cpu[i])) continue;
    if (std::memcmp(&gpu[i], &cpu[i], 4) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": GPU " << gpu[i] << ", CPU " << cpu[i];
  }
  return ::testing::AssertionSuccess();
}

struct Result {
  ddph_code_t code = DDPH_OK;
  std::string message;
  std::vector<float> data;
};

// One hook configuration open twice: on a GPU over NCCL, on the host over
// Gloo, each a world of one.
class Pair : public ddph_test::GpuCpuSessions {
 public:
  Pair(const std::string& hook, const std::string& options)
      : GpuCpuSessions(yaml("nccl", hook, options), yaml("gloo", hook, options)) {}

  // The bucket on the GPU, read back after the stream.
  Result on_gpu(const std::vector<float>& x, uint64_t index, uint64_t step) {
    DeviceVec<float> d(x);
    std::vector<float> shape = x;  // a host bucket of x's layout, moved onto d
    ddph_test::FloatBucket b(shape, index, step, true);
    Result r;
    r.code =
        ddph_test::run_bucket(gpu(), ddph_test::on_gpu(b.bucket, d.get(), stream()), &r.message);
    r.data = d.host(stream());
    return r;
  }
  Result on_cpu(const std::vector<float>& x, uint64_t index, uint64_t step) {
    Result r;
    r.data = x;
    r.code = ddph_test::quant::run_bucket_msg(cpu(), r.data, index, step, &r.message);
    return r;
  }
};

// Two buckets of lengths that are not multiples of 512 (5000 holds the
// all-negative and constant channels of inputs()), over three steps.
constexpr size_t kLengths[] = {5000, 777};

struct Combo {
  const char* hook;
  const char* protocol;
  int bits;
  const char* rounding;
  bool error_feedback;
  std::string options() const {
    return std::string("protocol: ") + protocol + ", bits: " + std::to_string(bits) +
           ", rounding: " + rounding +
           ", seed: 7, error_feedback: " + (error_feedback ? "true" : "false");
  }
};

std::vector<Combo> all_combos() {
  std::vector<Combo> out;
  for (const char* hook : {"per_tensor", "per_channel"})
    for (const char* protocol : {"allgather", "reduce_scatter"})
      for (int bits : {8, 4, 2})
        for (const char* rounding : {"nearest", "stochastic"})
          for (bool ef : {false, true}) out.push_back({hook, protocol, bits, rounding, ef});
  return out;
}

TEST(QuantGpuHooks, EveryCombinationMatchesTheCpuPathBitForBit) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const Combo& c : all_combos()) {
    SCOPED_TRACE(std::string(c.hook) + " {" + c.options() + "}");
    Pair p(c.hook, c.options());
    ASSERT_TRUE(p.ok());
    for (uint64_t step = 0; step < 3; ++step) {
      for (size_t k = 0; k < 2; ++k) {
        const std::vector<float> x = inputs(0, step, kLengths[k]);
        const Result g = p.on_gpu(x, k, step), h = p.on_cpu(x, k, step);
        ASSERT_EQ(g.code, DDPH_OK) << g.message;
        ASSERT_EQ(h.code, DDPH_OK) << h.message;
        ASSERT_TRUE(same_bits(g.data, h.data)) << "step " << step << ", bucket " << k;
        // Quantizing changed something: the comparison is not of two copies.
        if (step == 0 && k == 0) {
          EXPECT_NE(std::memcmp(g.data.data(), x.data(), 4 * x.size()), 0);
        }
      }
    }
    if (c.error_feedback) {
      // The residuals came back from the GPU as the CPU path's bytes.
      const std::string gs = hook_blob(ddph_test::session_state(p.gpu()));
      const std::string cs = hook_blob(ddph_test::session_state(p.cpu()));
      ASSERT_FALSE(cs.empty());
      EXPECT_TRUE(gs == cs) << "checkpoint blobs differ (" << gs.size() << " and " << cs.size()
                            << " bytes)";
    }
  }
}

// A checkpoint of the CPU path, loaded into a GPU session, puts the
// residuals on the GPU: the next steps match the CPU session's.
TEST(QuantGpuHooks, ACheckpointMovesFromTheHostToTheGpu) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const char* protocol : {"allgather", "reduce_scatter"}) {
    SCOPED_TRACE(protocol);
    const std::string options =
        std::string("protocol: ") + protocol + ", bits: 4, error_feedback: true";
    Pair p("per_channel", options);
    ASSERT_TRUE(p.ok());
    for (uint64_t step = 0; step < 2; ++step) {
      std::vector<float> x = inputs(0, step, kLengths[0]);
      ASSERT_EQ(ddph_test::quant::run_bucket_msg(p.cpu(), x, 0, step, nullptr), DDPH_OK);
    }
    const std::string state = ddph_test::session_state(p.cpu());
    ASSERT_FALSE(state.empty());
    ddph_error_t* e = ddph_session_load_state(p.gpu(), state.data(), state.size());
    ASSERT_EQ(e, nullptr) << ddph_error_message(e);
    for (uint64_t step = 2; step < 4; ++step) {
      const std::vector<float> x = inputs(0, step, kLengths[0]);
      const Result g = p.on_gpu(x, 0, step), h = p.on_cpu(x, 0, step);
      ASSERT_EQ(g.code, DDPH_OK) << g.message;
      ASSERT_EQ(h.code, DDPH_OK) << h.message;
      EXPECT_TRUE(same_bits(g.data, h.data)) << "step " << step;
    }
    EXPECT_TRUE(hook_blob(ddph_test::session_state(p.gpu())) ==
                hook_blob(ddph_test::session_state(p.cpu())));
  }
}

// NaN or Inf in a bucket: `propagate` ends as allreduce would (the same
// NaNs and values on both), `error` fails with the same code and text, and
// the residuals are the same afterwards either way.
TEST(QuantGpuHooks, ANonFiniteBucketEndsTheSameWayOnBoth) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const char* nonfinite : {"propagate", "error"})
    for (const char* protocol : {"allgather", "reduce_scatter"}) {
      const std::string options =
          std::string("protocol: ") + protocol + ", error_feedback: true, nonfinite: " + nonfinite;
      SCOPED_TRACE(options);
      Pair p("per_channel", options);
      ASSERT_TRUE(p.ok());
      std::vector<float> x = inputs(0, 0, kLengths[0]);
      const Result g0 = p.on_gpu(x, 0, 0), h0 = p.on_cpu(x, 0, 0);
      ASSERT_EQ(g0.code, DDPH_OK) << g0.message;
      x = inputs(0, 1, kLengths[0]);
      x[4321] = std::nanf("");
      x[17] = -INFINITY;
      const Result g = p.on_gpu(x, 0, 1), h = p.on_cpu(x, 0, 1);
      EXPECT_EQ(g.code, h.code) << g.message << " | " << h.message;
      EXPECT_EQ(g.message, h.message);
      if (std::string(nonfinite) == "propagate") {
        EXPECT_EQ(g.code, DDPH_OK) << g.message;
        EXPECT_TRUE(std::isnan(g.data[4321]) && std::isinf(g.data[17]));
        EXPECT_TRUE(same_bits(g.data, h.data));
      } else {
        EXPECT_EQ(g.code, DDPH_NONFINITE);
      }
      EXPECT_TRUE(hook_blob(ddph_test::session_state(p.gpu())) ==
                  hook_blob(ddph_test::session_state(p.cpu())));
    }
}

// Finite values near FLT_MAX: a constant channel at 3e38, and a channel
// spanning -3e38..3e38 whose PyTorch scale would overflow. Both paths give
// the same finite bits (docs/quantization.md, "Huge values").
TEST(QuantGpuHooks, HugeValuesEndTheSameWayOnBoth) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const char* protocol : {"allgather", "reduce_scatter"})
    for (int bits : {8, 2}) {
      const std::string options =
          std::string("protocol: ") + protocol + ", bits: " + std::to_string(bits);
      SCOPED_TRACE(options);
      Pair p("per_channel", options);
      ASSERT_TRUE(p.ok());
      std::vector<float> x = inputs(0, 0, kLengths[0]);
      for (size_t i = 0; i < 512; ++i) x[i] = 3e38f;
      for (size_t i = 512; i < 1024; ++i) x[i] = i % 2 ? 3e38f : -3e38f;
      const Result g = p.on_gpu(x, 0, 0), h = p.on_cpu(x, 0, 0);
      EXPECT_EQ(g.code, h.code) << g.message << " | " << h.message;
      EXPECT_TRUE(same_bits(g.data, h.data));
      for (float v : g.data) ASSERT_TRUE(std::isfinite(v)) << v;
    }
}

// A bucket under min_bytes is a plain allreduce on both.
TEST(QuantGpuHooks, ABucketUnderMinBytesIsAPlainAllreduce) {
  DDPH_SKIP_WITHOUT_GPU();
  Pair p("per_tensor", "min_bytes: 4096");
  ASSERT_TRUE(p.ok());
  const std::vector<float> x = inputs(0, 0, 1000);  // 4000 bytes
  const Result g = p.on_gpu(x, 0, 0), h = p.on_cpu(x, 0, 0);
  ASSERT_EQ(g.code, DDPH_OK) << g.message;
  ASSERT_EQ(h.code, DDPH_OK) << h.message;
  EXPECT_TRUE(same_bits(g.data, h.data));
  EXPECT_TRUE(same_bits(g.data, x));  // the mean of one rank is its bucket
}

}  // namespace
