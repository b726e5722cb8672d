#include "tests/support/gpu_lent_bucket.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace ddph_test {

LentBucket::LentBucket(bool cuda, const std::vector<size_t>& sizes, bool bf16)
    : cuda_(cuda), bf16_(bf16) {
  for (size_t s : sizes) shapes_.push_back(int64_t(s));
  for (size_t s : sizes) numel_ += int64_t(s);
  const size_t n = size_t(numel_);
  if (cuda_) {
    EXPECT_EQ(cudaMalloc(&grads_, n * (bf16_ ? 2 : 4) + 4), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&params_, n * 4 + 4), cudaSuccess);
  } else {
    host_grads_.resize(n);
    host_low_.resize(n);
    host_params_.resize(n);
    grads_ = bf16_ ? static_cast<void*>(host_low_.data()) : host_grads_.data();
    params_ = host_params_.data();
  }
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ddph_param_t v{};
    v.struct_size = sizeof v;
    v.offset = at;
    v.ndim = 1;
    v.shape = &shapes_[i];
    v.data.data = static_cast<float*>(params_) + at;
    v.data.device = {cuda_ ? kDLCUDA : kDLCPU, 0};
    v.data.ndim = 1;
    v.data.dtype = {kDLFloat, 32, 1};
    v.data.shape = &shapes_[i];
    views_.push_back(v);
    at += shapes_[i];
  }
}

LentBucket::~LentBucket() {
  if (!cuda_) return;
  cudaDeviceSynchronize();
  cudaFree(grads_);
  cudaFree(params_);
}

void LentBucket::copy_in(void* dst, const void* src, size_t bytes) {
  if (!cuda_) return (void)std::memcpy(dst, src, bytes);
  // As a host must before reusing a buffer: the previous step's work on the
  // bucket's stream (a non-blocking one, which cudaMemcpy does not wait
  // for) may still read it.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  // From pageable memory cudaMemcpy may return before its DMA lands, and
  // the hook's non-blocking stream does not wait for the legacy one.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

void LentBucket::copy_out(void* dst, const void* src, size_t bytes) const {
  if (cuda_) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void LentBucket::set_grads(const std::vector<float>& g) {
  EXPECT_EQ(g.size(), numel());
  if (!bf16_) return copy_in(grads_, g.data(), numel() * 4);
  std::vector<uint16_t> low(numel());
  for (size_t i = 0; i < low.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &g[i], 4);
    low[i] = uint16_t(bits >> 16);
  }
  copy_in(grads_, low.data(), numel() * 2);
}

void LentBucket::set_params(const std::vector<float>& p) {
  EXPECT_EQ(p.size(), numel());
  copy_in(params_, p.data(), numel() * 4);
}

std::vector<float> LentBucket::grads() const {
  std::vector<float> out(numel());
  if (!bf16_) {
    copy_out(out.data(), grads_, numel() * 4);
    return out;
  }
  std::vector<uint16_t> low(numel());
  copy_out(low.data(), grads_, numel() * 2);
  for (size_t i = 0; i < low.size(); ++i) {
    const uint32_t bits = uint32_t(low[i]) << 16;
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

std::vector<float> LentBucket::params() const {
  std::vector<float> out(numel());
  copy_out(out.data(), params_, numel() * 4);
  return out;
}

ddph_bucket_t LentBucket::bucket(uint64_t index, uint64_t step, bool is_last, void* stream) {
  ddph_bucket_t b{};
  b.struct_size = sizeof b;
  b.index = index;
  b.step = step;
  b.is_last = is_last ? 1 : 0;
  b.buffer.data = grads_;
  b.buffer.device = {cuda_ ? kDLCUDA : kDLCPU, 0};
  b.buffer.ndim = 1;
  b.buffer.dtype = bf16_ ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
  b.buffer.shape = &numel_;
  b.num_params = views_.size();
  b.params = views_.data();
  b.stream = cuda_ ? stream : nullptr;
  return b;
}

std::vector<float> varied_gradients(uint64_t step, double salt, size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = std::sin(double(i) * 0.37 + double(step) * 1.3 + salt);
    g[i] = float(x * std::pow(10.0, double(int(i % 7) - 3)));
  }
  return g;
}

std::vector<float> initial_params(size_t bucket, size_t n) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = float(std::cos(double(i) * 0.11 + double(bucket)));
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], 4) != 0) return false;
  }
  return true;
}

}  // namespace ddph_test
