// The powersgd hooks' CUDA path against their CPU path, world of one: the
// same buckets on a GPU over NCCL and on the host over Gloo, step by step
// across the start_iter switch, then their checkpoints, then a checkpoint
// of the CPU run loaded into a GPU session. Without a GPU each such test
// skips with one line; one test checks instead that a CUDA bucket is
// refused with the reason.
//
// The tolerance is derived in gpu_compare.h from the rounding of fp32 dot
// products (cuBLAS and the CPU sum in different orders).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/powersgd/state.h"
#include "tests/powersgd/gpu_compare.h"
#include "tests/powersgd/psgd_support.h"
#include "tests/support/cuda_device.h"
#include "tests/support/gpu_cpu_sessions.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

namespace p = ddph::powersgd;
namespace ps = ddph_test::psgd;
using ddph_test::DeviceVec;

constexpr int kStartIter = 3;
constexpr int kSteps = 6;
constexpr int kCompressedSteps = kSteps - kStartIter;

// Two buckets: matrices of two shapes (one shape twice: a batch), a bias
// and a 3-D gradient; at rank 4 the (8, 15) view fails the compression
// test and travels as it is.
const std::vector<ps::Shape> kBucket0 = {{16, 24}, {24}, {16, 24}, {8, 5, 3}};
const std::vector<ps::Shape> kBucket1 = {{12, 20}, {7}};

// The largest inner dimension of a product: the batched hook's side
// (ceil(sqrt(numel)) of the larger bucket), the layer-wise hook's columns.
int k_max() {
  const int64_t n = ps::numel_of(kBucket0);
  int64_t side = 0;
  while (side * side < n) ++side;
  return int(std::max<int64_t>(side, 24));
}

double tolerance() {
  return ps::gpu_tolerance(k_max(), kCompressedSteps);
}

struct Case {
  const char* hook;
  int rank;
  bool warm_start;
  bool error_feedback;
};

std::string options(const Case& c) {
  std::string o = "rank: " + std::to_string(c.rank) +
                  ", start_iter: " + std::to_string(kStartIter) +
                  ", warm_start: " + (c.warm_start ? "true" : "false") +
                  ", error_feedback: " + (c.error_feedback ? "true" : "false");
  // The remaining options ride along: batched same-shape draws, a stricter
  // compression test at rank 1 (the (12, 20) and (8, 15) views then travel
  // uncompressed), and Gram-Schmidt's epsilon without warm start.
  if (std::string(c.hook) == "powersgd")
    o += std::string(", batch_same_shape: true") + (c.rank == 1 ? ", min_compression_rate: 8" : "");
  if (!c.warm_start) o += ", orthogonalization_epsilon: 1e-6";
  return o;
}

std::string name(const Case& c) {
  return std::string(c.hook) + " rank " + std::to_string(c.rank) +
         (c.warm_start ? " warm" : " cold") + (c.error_feedback ? " feedback" : " no-feedback");
}

std::vector<float> gradients(size_t n, uint64_t index, int step) {
  return ps::gpu_gradients(n, 0, index, step);
}

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                 double tol) {
  return ps::gpu_close(got, want, tol);
}

class Pair : public ddph_test::GpuCpuSessions {
 public:
  explicit Pair(const Case& c)
      : GpuCpuSessions("comm: {backend: nccl, timeout: 60s}\nhook: {family: powersgd, name: " +
                           std::string(c.hook) + ", options: {" + options(c) + "}}\n",
                       ps::yaml(c.hook, options(c))) {}
};

// Runs one bucket on a GPU session; the result, read back after the stream.
std::vector<float> run_on_gpu(ddph_session_t* s, cudaStream_t stream,
                              const std::vector<float>& input, const std::vector<ps::Shape>& shapes,
                              uint64_t index, int step, bool is_last, std::string* message) {
  std::vector<float> shadow = input;  // the host bucket lends its parameter views
  ps::ShapedBucket host(shadow, shapes, index, uint64_t(step), is_last);
  DeviceVec<float> d(input);
  ddph_bucket_t b = *host.get();
  b.buffer.data = d.get();
  b.buffer.device = {kDLCUDA, 0};
  b.stream = stream;
  const ddph_code_t code = ddph_test::run_bucket(s, b, message);
  if (code != DDPH_OK) return {};
  return d.host(stream);
}

std::string hook_blob(ddph_session_t* s) {
  return ddph_test::hook_blob(ddph_test::session_state(s));
}

::testing::AssertionResult same_state(const p::PsgdState& gpu, const p::PsgdState& cpu,
                                      double tol) {
  if (gpu.iter != cpu.iter)
    return ::testing::AssertionFailure() << "step " << gpu.iter << ", want " << cpu.iter;
  if (gpu.rng.pos != cpu.rng.pos || gpu.rng.mt != cpu.rng.mt)
    return ::testing::AssertionFailure() << "the RNG states differ";
  if (gpu.buckets.size() != cpu.buckets.size())
    return ::testing::AssertionFailure()
           << gpu.buckets.size() << " buckets, want " << cpu.buckets.size();
  for (const auto& kv : cpu.buckets) {
    auto it = gpu.buckets.find(kv.first);
    if (it == gpu.buckets.end()) return ::testing::AssertionFailure() << "no bucket " << kv.first;
    const p::SavedBucket &g = it->second, &c = kv.second;
    if (g.has_pq != c.has_pq)
      return ::testing::AssertionFailure() << "bucket " << kv.first << ": P/Q presence differs";
    for (auto [what, a, b] : {std::make_tuple("P", &g.p, &c.p), std::make_tuple("Q", &g.q, &c.q),
                              std::make_tuple("error", &g.error, &c.error)}) {
      ::testing::AssertionResult r = close(*a, *b, tol);
      if (!r)
        return ::testing::AssertionFailure()
               << "bucket " << kv.first << " " << what << ": " << r.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs steps [from, to) of both buckets on both sessions and compares.
void run_steps(const Pair& pair, int from, int to, const std::string& label) {
  const std::vector<ps::Shape>* shapes[2] = {&kBucket0, &kBucket1};
  for (int step = from; step < to; ++step)
    for (uint64_t index = 0; index < 2; ++index) {
      const std::vector<float> in = gradients(size_t(ps::numel_of(*shapes[index])), index, step);
      std::vector<float> on_cpu = in;
      std::string message;
      ASSERT_EQ(ps::run_shaped(pair.cpu(), on_cpu, *shapes[index], index, uint64_t(step),
                               index == 1, &message),
                DDPH_OK)
          << label << " step " << step << ": " << message;
      const std::vector<float> on_gpu = run_on_gpu(pair.gpu(), pair.stream(), in, *shapes[index],
                                                   index, step, index == 1, &message);
      ASSERT_EQ(message, "") << label << " step " << step;
      if (step < kStartIter)  // plain allreduce: a divide by 1 and the same bits
        EXPECT_EQ(on_gpu, on_cpu) << label << " step " << step << " bucket " << index;
      else
        EXPECT_TRUE(close(on_gpu, on_cpu, tolerance()))
            << label << " step " << step << " bucket " << index;
    }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* hook : {"powersgd", "batched_powersgd"})
    for (int rank : {1, 4})
      for (bool warm : {true, false})
        for (bool feedback : {true, false}) out.push_back(Case{hook, rank, warm, feedback});
  return out;
}

TEST(PsgdGpuHooks, MatchTheCpuPathAcrossStartIterAndInTheirCheckpoints) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const Case& c : cases()) {
    const std::string label = name(c);
    Pair pair(c);
    ASSERT_TRUE(pair.ok()) << label;
    run_steps(pair, 0, kSteps, label);
    // save_state copies the GPU's P, Q and errors out: the CPU's format.
    const std::string g = hook_blob(pair.gpu()), h = hook_blob(pair.cpu());
    ASSERT_FALSE(g.empty()) << label;
    const p::HookKind kind =
        std::string(c.hook) == "powersgd" ? p::HookKind::kLayerwise : p::HookKind::kBatched;
    EXPECT_TRUE(same_state(p::decode_state(g.data(), g.size(), kind),
                           p::decode_state(h.data(), h.size(), kind), tolerance()))
        << label;
  }
}

// Huge finite values (docs/powersgd.md, "Huge values"): the GPU decides
// as the CPU does which matrices go uncompressed (one host wait per step),
// so both give finite results; a matrix averaged uncompressed at world 1 is
// its M, the same bits on both; the steps after stay within the tolerance.
TEST(PsgdGpuHooks, HugeValuesGoUncompressedAsOnTheCpu) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const Case& c : cases()) {
    const std::string label = name(c);
    Pair pair(c);
    ASSERT_TRUE(pair.ok()) << label;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> in = gradients(size_t(ps::numel_of(kBucket0)), 0, step);
      if (step == kStartIter)
        for (size_t i = 0; i < in.size(); i += 5) in[i] = i % 2 ? 3e38f : -FLT_MAX;
      std::vector<float> on_cpu = in;
      std::string message;
      ASSERT_EQ(ps::run_shaped(pair.cpu(), on_cpu, kBucket0, 0, uint64_t(step), true, &message),
                DDPH_OK)
          << label << " step " << step << ": " << message;
      const std::vector<float> on_gpu =
          run_on_gpu(pair.gpu(), pair.stream(), in, kBucket0, 0, step, true, &message);
      ASSERT_EQ(message, "") << label << " step " << step;
      for (size_t i = 0; i < in.size(); ++i)
        ASSERT_TRUE(std::isfinite(on_gpu[i]) && std::isfinite(on_cpu[i]))
            << label << " step " << step << " [" << i << "]: GPU " << on_gpu[i] << ", CPU "
            << on_cpu[i];
      if (step == kStartIter) {
        EXPECT_EQ(on_gpu, on_cpu) << label << " step " << step;
      } else if (step > kStartIter) {
        EXPECT_TRUE(close(on_gpu, on_cpu, tolerance())) << label << " step " << step;
      }
    }
  }
}

// A checkpoint written by the CPU path loads into a GPU session (uploaded
// on its first step there) and both continue alike.
TEST(PsgdGpuHooks, ACpuCheckpointResumesOnTheGpu) {
  DDPH_SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{"powersgd", 4, true, true}, Case{"batched_powersgd", 1, true, true}}) {
    const std::string label = name(c);
    Pair first(c);
    ASSERT_TRUE(first.ok()) << label;
    run_steps(first, 0, kSteps - 1, label);
    const std::string blob = ddph_test::session_state(first.cpu());
    ASSERT_FALSE(blob.empty()) << label;
    Pair resumed(c);
    ASSERT_TRUE(resumed.ok()) << label;
    for (ddph_session_t* s : {resumed.gpu(), resumed.cpu()}) {
      ddph_error_t* e = ddph_session_load_state(s, blob.data(), blob.size());
      ASSERT_EQ(e, nullptr) << label << ": " << ddph_error_message(e);
    }
    run_steps(resumed, kSteps - 1, kSteps + 1, label + " resumed");
  }
}

// A refused CUDA bucket costs the hook nothing: its state (moved out of the
// step's memory on the way to the GPU) comes back on the next host step,
// which gives the bits of a run that never saw the CUDA bucket.
TEST(PsgdWithoutGpu, ACudaBucketIsRefusedWithTheReasonAndTheStateSurvives) {
  if (ddph_test::no_cuda_device_reason().empty())
    GTEST_SKIP() << "a GPU is present: the PsgdGpuHooks tests cover it";
  // Over Gloo: what is checked is the hook's own refusal, before any
  // collective or any read of the (never dereferenced) device pointer.
  for (const char* hook : {"powersgd", "batched_powersgd"}) {
    const std::string yaml = ps::yaml(hook, "rank: 2, start_iter: 2");
    std::string error;
    ddph_session_t* plain =
        ddph_test::open_session(yaml, 0, 1, ddph_test::make_temp_dir("ddph-psgd-gpu"), &error);
    ASSERT_NE(plain, nullptr) << error;
    ddph_session_t* s =
        ddph_test::open_session(yaml, 0, 1, ddph_test::make_temp_dir("ddph-psgd-gpu"), &error);
    ASSERT_NE(s, nullptr) << error;
    const size_t n = size_t(ps::numel_of(kBucket0));
    for (int step = 0; step < 5; ++step) {
      if (step == 3) {
        std::vector<float> shadow(n, 1.0f);
        ps::ShapedBucket views(shadow, kBucket0, 0, uint64_t(step), true);
        ddph_bucket_t b = *views.get();
        b.buffer.data = reinterpret_cast<void*>(uintptr_t(0x1000));
        b.buffer.device = {kDLCUDA, 0};
        std::string message;
        EXPECT_EQ(ddph_test::run_bucket(s, b, &message), DDPH_UNSUPPORTED) << hook << message;
        EXPECT_NE(message.find("powersgd: no usable CUDA device"), std::string::npos) << message;
      }
      std::vector<float> x = gradients(n, 0, step), y = x;
      ASSERT_EQ(ps::run_shaped(plain, x, kBucket0, 0, uint64_t(step), true), DDPH_OK) << hook;
      ASSERT_EQ(ps::run_shaped(s, y, kBucket0, 0, uint64_t(step), true), DDPH_OK) << hook;
      EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0) << hook << " step " << step;
    }
    EXPECT_EQ(hook_blob(s), hook_blob(plain)) << hook;
    ddph_session_close(s);
    ddph_session_close(plain);
  }
}

}  // namespace
