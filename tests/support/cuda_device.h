// For the GPU tests: whether a CUDA device is usable, and device memory that
// frees itself. Without a device, each GPU test skips with the one-line
// reason (libcudart loads the driver lazily, so the binary starts anywhere).
#pragma once

#include <cuda_runtime_api.h>
#include <ddph/ddph.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace ddph_test {

// "" when a device is usable, else why not.
inline std::string probe_cuda_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return std::string("no CUDA device: cudaGetDeviceCount found none");
  return std::string();
}

// The same, asked once in this process.
inline const std::string& no_cuda_device_reason() {
  static const std::string reason = probe_cuda_device();
  return reason;
}

// The same, asked in a child process, for tests that fork ranks which use
// CUDA: a child cannot use a CUDA runtime its parent had initialised before
// fork(), so the parent must not touch CUDA itself.
inline std::string no_cuda_device_reason_before_fork() {
  int fds[2];
  if (pipe(fds) != 0) return "no CUDA device: pipe() failed";
  const pid_t pid = fork();
  if (pid < 0) return "no CUDA device: fork() failed";
  if (pid == 0) {
    close(fds[0]);
    const std::string reason = probe_cuda_device();
    const ssize_t written = write(fds[1], reason.data(), reason.size());
    _exit(written == ssize_t(reason.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string reason;
  char chunk[256];
  for (ssize_t got; (got = read(fds[0], chunk, sizeof chunk)) > 0;)
    reason.append(chunk, size_t(got));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "no CUDA device: the probe crashed";
  return reason;
}

#define DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK()                                       \
  do {                                                                            \
    const std::string reason_ = ::ddph_test::no_cuda_device_reason_before_fork(); \
    if (!reason_.empty()) GTEST_SKIP() << reason_;                                \
  } while (0)

#define DDPH_SKIP_WITHOUT_GPU()                             \
  do {                                                      \
    if (!::ddph_test::no_cuda_device_reason().empty())      \
      GTEST_SKIP() << ::ddph_test::no_cuda_device_reason(); \
  } while (0)

// n elements of device memory, optionally a copy of a host vector.
template <class T>
class DeviceVec {
 public:
  explicit DeviceVec(size_t n) : n_(n) {
    if (n_ == 0) return;
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p_, 0, n_ * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // as below: before any other stream writes
  }
  // Waits until the copy has landed: cudaMemcpy from pageable memory may
  // return before its DMA does, and a hook's non-blocking stream does not
  // wait for the legacy stream the copy went on.
  explicit DeviceVec(const std::vector<T>& v) : DeviceVec(v.size()) {
    if (n_ != 0) {
      EXPECT_EQ(cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
  }
  ~DeviceVec() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  // Waits for stream (NULL: the whole device), then copies back.
  std::vector<T> host(cudaStream_t stream = nullptr) const {
    EXPECT_EQ(stream != nullptr ? cudaStreamSynchronize(stream) : cudaDeviceSynchronize(),
              cudaSuccess);
    std::vector<T> out(n_);
    if (n_ != 0) {
      EXPECT_EQ(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// A parameterized GPU test: skips without a GPU (one line), else gives each
// test a non-blocking stream of its own, so any ordering is the hook's.
template <class Param>
class GpuStreamTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    DDPH_SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

// Bucket b moved onto the GPU: the same index, step and parameter views,
// its buffer's data at `data` on device 0, enqueued on `stream`.
inline ddph_bucket_t on_gpu(ddph_bucket_t b, void* data, cudaStream_t stream) {
  b.buffer.data = data;
  b.buffer.byte_offset = 0;
  b.buffer.device = DLDevice{kDLCUDA, 0};
  b.stream = stream;
  return b;
}

// "" when gpu and cpu hold the same bits; else how many elements differ,
// and the first of them.
inline std::string bit_difference(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  if (gpu.size() != cpu.size())
    return std::to_string(gpu.size()) + " elements against " + std::to_string(cpu.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < gpu.size(); ++i)
    if (std::memcmp(&gpu[i], &cpu[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  if (differ == 0) return "";
  char text[160];
  std::snprintf(text, sizeof text, "%zu elements differ, first [%zu]: GPU %.9g, CPU %.9g", differ,
                first, double(gpu[first]), double(cpu[first]));
  return text;
}

}  // namespace ddph_test
