// CUDA buffers on the Gloo communicator (core/comm/host_staging.h): two real
// processes sharing one GPU, which NCCL would refuse. Each collective's
// result on device memory, enqueued on a stream, must be what the same
// collective gives on host memory: small integers, so every sum is exact.
// Without a GPU the test skips with one line.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/comm_gloo/harness.h"
#include "tests/support/cuda_device.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

#define CHILD_CUDA(call) DDPH_CHILD_CHECK((call) == cudaSuccess, "rank %d: %s failed", rank, #call)

// n floats of device memory, as a DLTensor.
struct DeviceFloats {
  explicit DeviceFloats(int64_t n) : numel(n) {
    if (cudaMalloc(&data, size_t(n) * sizeof(float)) != cudaSuccess) data = nullptr;
    dl.data = data;
    dl.device = DLDevice{kDLCUDA, 0};
    dl.ndim = 1;
    dl.dtype = kF32;
    dl.shape = &numel;
  }
  ~DeviceFloats() { cudaFree(data); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  bool put(const std::vector<float>& v, cudaStream_t s) {
    return cudaMemcpyAsync(data, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice, s) ==
           cudaSuccess;
  }
  // Waits for the stream: what a caller does before reading the result.
  std::vector<float> get(cudaStream_t s) const {
    std::vector<float> v(static_cast<size_t>(numel));
    if (cudaMemcpyAsync(v.data(), data, v.size() * sizeof(float), cudaMemcpyDeviceToHost, s) !=
            cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess)
      v.assign(v.size(), -12345.0f);
    return v;
  }
  void* data = nullptr;
  int64_t numel;
  DLTensor dl{};
};

float value(int rank, int i) {
  return float(1 + (i * 7 + rank * 3) % 11);
}

std::vector<float> values(int rank, int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = value(rank, i);
  return v;
}

int staged_body(int rank, int world, const std::string& dir) {
  CHILD_CUDA(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  CHILD_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Connect c;
  c.rank = rank;
  c.world = world;
  c.rendezvous = file_url(dir + "/store");
  c.timeout_ms = 30000;
  Err err;
  ddph_comm_t* comm = connect(c, &err);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d: connect: %s", rank, err.text().c_str());
  const int n = 1000;

  // allreduce SUM in place: the stream's earlier write must be what is sent.
  {
    DeviceFloats buf(n);
    DDPH_CHILD_CHECK(buf.put(values(rank, n), s), "rank %d: put", rank);
    CHILD_OK(comm->allreduce(comm->ctx, &buf.dl, &buf.dl, DDPH_SUM, s));
    const std::vector<float> got = buf.get(s);
    for (int i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < world; ++r) want += value(r, i);
      DDPH_CHILD_CHECK(got[size_t(i)] == want, "allreduce [%d]: %g, want %g", i, got[size_t(i)],
                       want);
    }
  }
  // allreduce AVG into a separate buffer leaves send alone.
  {
    DeviceFloats send(n), recv(n);
    std::vector<float> in(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) in[size_t(i)] = float(world) * value(rank, i);
    DDPH_CHILD_CHECK(send.put(in, s), "rank %d: put", rank);
    CHILD_OK(comm->allreduce(comm->ctx, &send.dl, &recv.dl, DDPH_AVG, s));
    const std::vector<float> got = recv.get(s), kept = send.get(s);
    for (int i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < world; ++r) want += value(r, i);
      DDPH_CHILD_CHECK(got[size_t(i)] == want, "AVG [%d]: %g, want %g", i, got[size_t(i)], want);
      DDPH_CHILD_CHECK(kept[size_t(i)] == in[size_t(i)], "AVG changed send [%d]", i);
    }
  }
  // allgather, then broadcast from the last rank.
  {
    DeviceFloats send(n), all(int64_t(n) * world);
    DDPH_CHILD_CHECK(send.put(values(rank, n), s), "rank %d: put", rank);
    CHILD_OK(comm->allgather(comm->ctx, &send.dl, &all.dl, s));
    const std::vector<float> got = all.get(s);
    for (int r = 0; r < world; ++r)
      for (int i = 0; i < n; ++i)
        DDPH_CHILD_CHECK(got[size_t(r * n + i)] == value(r, i), "allgather [%d][%d]", r, i);
    DDPH_CHILD_CHECK(send.put(values(rank, n), s), "rank %d: put", rank);
    CHILD_OK(comm->broadcast(comm->ctx, &send.dl, world - 1, s));
    const std::vector<float> b = send.get(s);
    for (int i = 0; i < n; ++i)
      DDPH_CHILD_CHECK(b[size_t(i)] == value(world - 1, i), "broadcast [%d]", i);
  }
  // alltoallv: rank r sends r + j + 1 elements to rank j.
  {
    std::vector<int64_t> send_counts(static_cast<size_t>(world)),
        recv_counts(static_cast<size_t>(world));
    int64_t send_total = 0, recv_total = 0;
    for (int j = 0; j < world; ++j) {
      send_counts[size_t(j)] = rank + j + 1;
      recv_counts[size_t(j)] = j + rank + 1;
      send_total += send_counts[size_t(j)];
      recv_total += recv_counts[size_t(j)];
    }
    DeviceFloats send(send_total), recv(recv_total);
    std::vector<float> out;
    for (int j = 0; j < world; ++j)
      for (int64_t k = 0; k < send_counts[size_t(j)]; ++k) out.push_back(float(100 * rank + j));
    DDPH_CHILD_CHECK(send.put(out, s), "rank %d: put", rank);
    CHILD_OK(
        comm->alltoallv(comm->ctx, &send.dl, send_counts.data(), &recv.dl, recv_counts.data(), s));
    const std::vector<float> got = recv.get(s);
    size_t at = 0;
    for (int j = 0; j < world; ++j)
      for (int64_t k = 0; k < recv_counts[size_t(j)]; ++k, ++at)
        DDPH_CHILD_CHECK(got[at] == float(100 * j + rank), "alltoallv from %d: %g", j, got[at]);
  }
  // Misuse is named, and leaves the communicator working.
  {
    DeviceFloats dev(n);
    ddph_test::Tensor host(kF32, n);
    Err mixed = take(comm->allreduce(comm->ctx, &dev.dl, host.dl(), DDPH_SUM, s));
    DDPH_CHILD_CHECK(mixed.code == DDPH_INVALID_ARGUMENT &&
                         mixed.message.find("different devices") != std::string::npos,
                     "mixed devices: %s", mixed.text().c_str());
    DLTensor liar = *host.dl();
    liar.device = DLDevice{kDLCUDA, 0};
    Err lie = take(comm->allreduce(comm->ctx, &liar, &liar, DDPH_SUM, s));
    DDPH_CHILD_CHECK(lie.code == DDPH_INVALID_ARGUMENT &&
                         lie.message.find("not CUDA device memory") != std::string::npos,
                     "host memory labelled CUDA: %s", lie.text().c_str());
    DDPH_CHILD_CHECK(dev.put(values(rank, n), s), "rank %d: put", rank);
    CHILD_OK(comm->allreduce(comm->ctx, &dev.dl, &dev.dl, DDPH_MAX, s));
    const std::vector<float> got = dev.get(s);
    for (int i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < world; ++r) want = std::max(want, value(r, i));
      DDPH_CHILD_CHECK(got[size_t(i)] == want, "MAX after misuse [%d]", i);
    }
  }
  comm->destroy(comm->ctx);
  cudaStreamDestroy(s);
  return 0;
}

TEST(CommGlooOnCuda, CollectivesOnDeviceMemoryMatchHostResults) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  for (int world : {2, 3}) {
    const auto results = ddph_test::run_ranks(world, staged_body, 120);
    EXPECT_TRUE(ddph_test::all_passed(results))
        << "world " << world << ": " << ddph_test::describe(results);
  }
}

}  // namespace
}  // namespace comm_gloo_test
