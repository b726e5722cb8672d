// comm_nccl through the public session API, on a world of one GPU: the
// collectives on CUDA memory (enqueued on a stream) and on host memory
// (staged through the GPU), divide-first averaging, split, and the
// allreduce hook on a CUDA bucket. Without a GPU every such test skips with
// one line, and one test checks instead that opening an NCCL session says
// plainly that no device is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/kernels/divide.h"
#include "tests/support/cuda_device.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::DeviceVec;

std::string yaml(const std::string& hook) {
  return "comm: {backend: nccl, timeout: 20s}\nhook: " + hook + "\n";
}

DLTensor tensor(void* data, DLDataType dtype, int64_t* shape, bool cuda) {
  DLTensor t{};
  t.data = data;
  t.device = {cuda ? kDLCUDA : kDLCPU, 0};
  t.ndim = 1;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

constexpr DLDataType kF32{kDLFloat, 32, 1};

class NcclWorldOfOne : public ::testing::Test {
 protected:
  void SetUp() override {
    DDPH_SKIP_WITHOUT_GPU();
    std::string error;
    session_ = ddph_test::open_session(yaml("{family: default, name: allreduce}"), 0, 1,
                                       ddph_test::make_temp_dir("ddph-nccl"), &error);
    ASSERT_NE(session_, nullptr) << error;
    comm_ = ddph_session_comm(session_);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    ddph_session_close(session_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void ok(ddph_error_t* e) {
    std::string text = e != nullptr ? ddph_error_message(e) : "";
    ddph_error_free(e);
    EXPECT_EQ(text, "");
  }
  ddph_session_t* session_ = nullptr;
  ddph_comm_t* comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST(CommNcclWithoutGpu, OpeningASessionSaysNoDeviceIsUsable) {
  if (ddph_test::no_cuda_device_reason().empty())
    GTEST_SKIP() << "a GPU is present: the NcclWorldOfOne tests cover it";
  ddph_test::OpenOutcome out = ddph_test::open_outcome(yaml("{family: default, name: allreduce}"),
                                                       0, 1, ddph_test::make_temp_dir("ddph-nccl"));
  EXPECT_EQ(out.code, DDPH_UNSUPPORTED) << out.message;
  EXPECT_NE(out.message.find("comm_nccl: no usable CUDA device"), std::string::npos) << out.message;
}

TEST_F(NcclWorldOfOne, ReductionsOnDeviceMemoryAreOrderedOnTheStream) {
  // On one rank every reduction is the identity (AVG divides by 1; the
  // divide itself is checked bit for bit in tests/kernels): what this checks
  // is that device pointers reach NCCL and the result is on the stream.
  std::vector<float> host = {1.5f, -2.25f, 3e38f, 1e-40f, 0.1f};
  int64_t n = int64_t(host.size());
  for (ddph_reduce_op_t op : {DDPH_SUM, DDPH_AVG, DDPH_MAX, DDPH_MIN}) {
    DeviceVec<float> d(host);
    DLTensor t = tensor(d.get(), kF32, &n, true);
    ok(comm_->allreduce(comm_->ctx, &t, &t, op, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(d.host(), host) << "op " << int(op);
  }
}

TEST_F(NcclWorldOfOne, HostMemoryIsStagedThroughTheGpu) {
  std::vector<int32_t> send = {1, -7, 42}, recv(3, 0);
  int64_t n = 3;
  DLTensor s = tensor(send.data(), {kDLInt, 32, 1}, &n, false);
  DLTensor r = tensor(recv.data(), {kDLInt, 32, 1}, &n, false);
  ok(comm_->allreduce(comm_->ctx, &s, &r, DDPH_SUM, nullptr));
  EXPECT_EQ(recv, send);  // waited for: the host sees the result at once
  ok(comm_->barrier(comm_->ctx));
}

TEST_F(NcclWorldOfOne, GatherScatterBroadcastAndAlltoallvMoveTheRightBytes) {
  std::vector<float> host = {1, 2, 3, 4};
  int64_t n = 4;
  DeviceVec<float> a(host), b(4);
  DLTensor ta = tensor(a.get(), kF32, &n, true), tb = tensor(b.get(), kF32, &n, true);
  ok(comm_->allgather(comm_->ctx, &ta, &tb, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(b.host(), host);
  DeviceVec<float> c(4);
  DLTensor tc = tensor(c.get(), kF32, &n, true);
  ok(comm_->reduce_scatter(comm_->ctx, &ta, &tc, DDPH_AVG, stream_));
  ok(comm_->broadcast(comm_->ctx, &tc, 0, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(c.host(), host);
  DeviceVec<float> d(4);
  DLTensor td = tensor(d.get(), kF32, &n, true);
  const int64_t counts[1] = {4};
  ok(comm_->alltoallv(comm_->ctx, &ta, counts, &td, counts, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(d.host(), host);
}

// In place: send is this rank's block of recv, as ddph.h allows and the
// quantization protocols gather; an overlap that is not that block is misuse.
TEST_F(NcclWorldOfOne, AllgatherInPlaceIsAcceptedAndOtherOverlapsAreNot) {
  std::vector<float> host = {5, 6, 7};
  int64_t n = 3, two = 2;
  DeviceVec<float> a(host);
  DLTensor whole = tensor(a.get(), kF32, &n, true);  // rank 0's block is all of it
  ok(comm_->allgather(comm_->ctx, &whole, &whole, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(a.host(), host);
  DeviceVec<float> b(3);
  DLTensor recv = tensor(b.get(), kF32, &two, true);
  DLTensor shifted = tensor(b.get() + 1, kF32, &two, true);  // overlaps, not rank 0's block
  ddph_error_t* e = comm_->allgather(comm_->ctx, &shifted, &recv, stream_);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddph_error_message(e)).find("rank 0's block"), std::string::npos)
      << ddph_error_message(e);
  ddph_error_free(e);
}

// ddph.h lets send alias recv, as Gloo and MPI take it: an overlapping
// send is reduced from a copy, so recv gets send's values as they were.
TEST_F(NcclWorldOfOne, ReduceScatterTakesOverlappingBuffers) {
  std::vector<float> host = {1, 2, 3, 4, 5};
  int64_t four = 4;
  for (ddph_reduce_op_t op : {DDPH_SUM, DDPH_AVG}) {
    DeviceVec<float> b(host);
    DLTensor send = tensor(b.get(), kF32, &four, true);
    DLTensor recv = tensor(b.get() + 1, kF32, &four, true);  // one element along
    ok(comm_->reduce_scatter(comm_->ctx, &send, &recv, op, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(b.host(), (std::vector<float>{1, 1, 2, 3, 4})) << "op " << int(op);
  }
  DeviceVec<float> same(host);
  int64_t five = 5;
  DLTensor whole = tensor(same.get(), kF32, &five, true);  // NCCL's own in-place layout
  ok(comm_->reduce_scatter(comm_->ctx, &whole, &whole, DDPH_SUM, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(same.host(), host);
}

TEST_F(NcclWorldOfOne, SplitGivesAGroupOrNothing) {
  ddph_comm_t* sub = nullptr;
  ok(comm_->split(comm_->ctx, 0, 0, &sub));
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(sub->ctx), 1);
  EXPECT_EQ(sub->rank(sub->ctx), 0);
  sub->destroy(sub->ctx);
  ok(comm_->split(comm_->ctx, -1, 0, &sub));
  EXPECT_EQ(sub, nullptr);
}

TEST_F(NcclWorldOfOne, MisuseIsAnErrorNamingTheArgument) {
  std::vector<float> host(4, 1.0f);
  int64_t n = 4, three = 3;
  DeviceVec<float> a(host);
  DLTensor ta = tensor(a.get(), kF32, &n, true);
  DLTensor short_host = tensor(host.data(), kF32, &three, false);
  ddph_error_t* e = comm_->allreduce(comm_->ctx, &ta, &short_host, DDPH_SUM, stream_);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(ddph_error_message(e)).find("different devices"), std::string::npos)
      << ddph_error_message(e);
  ddph_error_free(e);
  e = comm_->send(comm_->ctx, &ta, 0, stream_);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(ddph_error_message(e)).find("this rank itself"), std::string::npos);
  ddph_error_free(e);
}

TEST_F(NcclWorldOfOne, TheAllreduceHookRunsOnACudaBucket) {
  std::vector<float> host = {0.5f, -1.0f, 2.0f, 1e-3f};
  DeviceVec<float> d(host);
  ddph_bucket_t b{};
  int64_t n = 4;
  b.struct_size = sizeof b;
  b.is_last = 1;
  b.buffer = tensor(d.get(), kF32, &n, true);
  b.stream = stream_;
  std::string message;
  EXPECT_EQ(ddph_test::run_bucket(session_, b, &message), DDPH_OK) << message;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(d.host(), host);  // the mean over a world of one
}

// The hooks with a CUDA path give, on a GPU bucket over NCCL, the bits their
// CPU path gives over Gloo (world 1: the casts and divides are the whole
// difference, and those are the shared per-element math).
TEST(NcclHooks, CudaPathsMatchTheCpuPathBitForBit) {
  DDPH_SKIP_WITHOUT_GPU();
  const char* hooks[] = {
      "{family: default, name: fp16_compress}",
      "{family: default, name: bf16_compress}",
      "{family: default, name: fp16_wrapper, wrap: {family: default, name: allreduce}}",
      "{family: default, name: bf16_wrapper, wrap: {family: default, name: allreduce}}",
  };
  std::vector<float> input = {1.0f, -2.5f, 3.14159f, 1e-6f, 65519.0f, 7e-8f, -0.0f, 1234.5678f};
  for (const char* hook : hooks) {
    std::string error;
    ddph_session_t* gpu =
        ddph_test::open_session(yaml(hook), 0, 1, ddph_test::make_temp_dir("ddph-nccl"), &error);
    ASSERT_NE(gpu, nullptr) << hook << ": " << error;
    ddph_session_t* cpu = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\nhook: " + std::string(hook) + "\n", 0, 1,
        ddph_test::make_temp_dir("ddph-nccl"), &error);
    ASSERT_NE(cpu, nullptr) << hook << ": " << error;
    std::vector<float> on_cpu = input;
    ddph_test::FloatBucket cb(on_cpu, 0, 0, true);
    ASSERT_EQ(ddph_test::run_bucket(cpu, cb), DDPH_OK) << hook;
    DeviceVec<float> d(input);
    int64_t n = int64_t(input.size());
    ddph_bucket_t b{};
    b.struct_size = sizeof b;
    b.is_last = 1;
    b.buffer = tensor(d.get(), kF32, &n, true);
    std::string message;
    EXPECT_EQ(ddph_test::run_bucket(gpu, b, &message), DDPH_OK) << hook << ": " << message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> back = d.host();
    EXPECT_EQ(std::memcmp(back.data(), on_cpu.data(), back.size() * 4), 0) << hook;
    ddph_session_close(gpu);
    ddph_session_close(cpu);
  }
}

// mixed_precision/allreduce_upcast on a bf16 GPU bucket over NCCL against
// the host bucket over Gloo: the bucket's mean and every parameter's fp32
// gradient, bit for bit (its divide and upcasts are the shared kernels).
TEST(NcclHooks, AllreduceUpcastWritesTheCpuPathsFp32Gradients) {
  DDPH_SKIP_WITHOUT_GPU();
  const char* hook = "{family: mixed_precision, name: allreduce_upcast}";
  std::vector<int64_t> shapes[] = {{3, 4}, {5}};
  const int64_t n = 17;
  std::vector<uint16_t> bits(n);
  for (int64_t i = 0; i < n; ++i)  // bf16 from about 2^-6 to 2^3, both signs
    bits[size_t(i)] = uint16_t((i % 2) << 15 | (121 + i % 10) << 7 | (i * 37 % 128));
  // Runs the hook with the bucket and fp32 gradients in host or GPU memory.
  auto run = [&](bool cuda, std::vector<uint16_t>* mean, std::vector<float>* grads) {
    std::string error;
    const std::string comm =
        cuda ? "comm: {backend: nccl, timeout: 20s}\n" : "comm: {backend: gloo, timeout: 20s}\n";
    ddph_session_t* s = ddph_test::open_session(comm + "hook: " + hook + "\n", 0, 1,
                                                ddph_test::make_temp_dir("ddph-nccl"), &error);
    ASSERT_NE(s, nullptr) << error;
    std::vector<uint16_t> host_bits = bits;
    std::vector<float> host_grads(size_t(n), -999.0f);
    DeviceVec<uint16_t> d_bits(bits);
    DeviceVec<float> d_grads(host_grads);
    void* data = cuda ? static_cast<void*>(d_bits.get()) : host_bits.data();
    float* g = cuda ? d_grads.get() : host_grads.data();
    int64_t len = n;
    std::vector<ddph_param_t> views;
    int64_t offset = 0;
    for (auto& shape : shapes) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      ddph_param_t v{};
      v.struct_size = sizeof v;
      v.offset = offset;
      v.ndim = int32_t(shape.size());
      v.shape = shape.data();
      v.data = tensor(g + offset, kF32, shape.data(), cuda);
      v.data.ndim = v.ndim;
      views.push_back(v);
      offset += count;
    }
    ddph_bucket_t b{};
    b.struct_size = sizeof b;
    b.is_last = 1;
    b.buffer = tensor(data, DLDataType{kDLBfloat, 16, 1}, &len, cuda);
    b.num_params = views.size();
    b.params = views.data();
    std::string message;
    ASSERT_EQ(ddph_test::run_bucket(s, b, &message), DDPH_OK) << message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    *mean = cuda ? d_bits.host() : host_bits;
    *grads = cuda ? d_grads.host() : host_grads;
    ddph_session_close(s);
  };
  std::vector<uint16_t> cpu_mean, gpu_mean;
  std::vector<float> cpu_grads, gpu_grads;
  run(false, &cpu_mean, &cpu_grads);
  run(true, &gpu_mean, &gpu_grads);
  EXPECT_EQ(gpu_mean, cpu_mean);
  ASSERT_EQ(gpu_grads.size(), cpu_grads.size());
  EXPECT_EQ(std::memcmp(gpu_grads.data(), cpu_grads.data(), cpu_grads.size() * 4), 0);
  EXPECT_NE(cpu_grads[0], -999.0f);  // the hook wrote the gradients
}

}  // namespace
