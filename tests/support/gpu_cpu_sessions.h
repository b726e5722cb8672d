// The pair every world-of-one GPU hook test compares: one session running
// the hook on GPU buckets over NCCL, one running it on host buckets over
// Gloo, and a non-blocking stream for the GPU buckets (not the legacy
// default stream, so any ordering is the hook's own doing). Link
// tests/support/session_ranks.cpp and the CUDA runtime.
#pragma once

#include <cuda_runtime_api.h>
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace ddph_test {

class GpuCpuSessions {
 public:
  // Each YAML names its own comm backend; each session gets its own store.
  GpuCpuSessions(const std::string& gpu_yaml, const std::string& cpu_yaml) {
    std::string error;
    gpu_ = open_session(gpu_yaml, 0, 1, make_temp_dir("ddph-gpu"), &error);
    EXPECT_NE(gpu_, nullptr) << error;
    cpu_ = open_session(cpu_yaml, 0, 1, make_temp_dir("ddph-cpu"), &error);
    EXPECT_NE(cpu_, nullptr) << error;
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  ~GpuCpuSessions() {
    if (gpu_ != nullptr) ddph_session_close(gpu_);
    if (cpu_ != nullptr) ddph_session_close(cpu_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  GpuCpuSessions(const GpuCpuSessions&) = delete;
  GpuCpuSessions& operator=(const GpuCpuSessions&) = delete;

  bool ok() const { return gpu_ != nullptr && cpu_ != nullptr && stream_ != nullptr; }
  ddph_session_t* gpu() const { return gpu_; }
  ddph_session_t* cpu() const { return cpu_; }
  cudaStream_t stream() const { return stream_; }

 private:
  ddph_session_t* gpu_ = nullptr;
  ddph_session_t* cpu_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace ddph_test
