// State a hook family keeps from step to step (error feedback, optimizer
// slots, low-rank factors): float arrays in the memory of the bucket they
// belong to, host memory or the bucket's GPU, so a step never copies state
// across PCIe. They meet the host only at the edges: values from a
// checkpoint (or from earlier host steps) go up when a step first needs
// them on its GPU, save_state reads them back, and a bucket that changes
// memory takes them along.
//
// Device memory comes from cudaMalloc and is kept until the length or the
// device changes, so a steady step allocates nothing. It is not taken from
// the host's allocator (ABI 1.3), which lends the scratch of GPU buckets
// (core/base/device_allocator.h, docs/abi.md). Work on it is
// enqueued on the stream of the Where given (the bucket's). A failed CUDA
// call is an Error naming `who` and the call (core/kernels/cuda/
// cuda_check.h); in a build without CUDA, CUDA memory is refused with
// refuse_cuda_memory(who), here and nowhere else in the families.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "core/base/dtype.h"
#include "core/kernels/on_device.h"

namespace ddph {

// dst[i] += add[i] for the n values of dtype (float32, float16 or bfloat16)
// at dst, in at's memory, from n host floats: in float32, a
// 16-bit value rounded once. For the rare flush of a kept residual into a
// bucket (ABI 1.10's take_residual), so on a GPU it goes through the host
// and waits for the device rather than needing a kernel of its own. `who`
// names the caller in errors.
void add_host_floats(const Where& at, DType dtype, void* dst, const float* add, size_t n,
                     const char* who);

// One float array, in host memory or on one GPU.
class ResidentFloats {
 public:
  // `who` (a string that outlives the array: the family or hook name)
  // names the caller in errors.
  explicit ResidentFloats(const char* who = "ddphooks") : who_(who) {}
  // Frees device memory; errors are dropped (a destructor cannot report).
  ~ResidentFloats();
  ResidentFloats(ResidentFloats&& other) noexcept;
  ResidentFloats& operator=(ResidentFloats&& other) noexcept;
  ResidentFloats(const ResidentFloats&) = delete;
  ResidentFloats& operator=(const ResidentFloats&) = delete;

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  // The floats, in the memory they are in (device memory on a GPU).
  float* data() { return device_ != nullptr ? device_ : host_.data(); }
  const float* data() const { return device_ != nullptr ? device_ : host_.data(); }
  // Whether the floats are in at's memory (the same GPU for a CUDA Where).
  // An empty array on a GPU counts as host memory.
  bool in(const Where& at) const;

  // n zeros in at's memory. Device memory is reused when the array is
  // already n floats on at's GPU.
  void zeros(const Where& at, size_t n);
  // n floats in at's memory: the values are kept when the array is already
  // n floats there, else it becomes n zeros.
  void fit(const Where& at, size_t n);
  // Puts the floats in at's memory, keeping their values (a bucket that
  // changed device, or values loaded on the host meeting a GPU bucket).
  void move_to(const Where& at);
  // The n floats at `host` in at's memory. The host memory may change once
  // this returns.
  void upload(const Where& at, const float* host, size_t n);

  // Host floats, as loaded from a checkpoint; device memory is freed.
  void set_host(std::vector<float> v);
  // A host copy of the values. From a GPU it waits for the whole device
  // first: checkpoints are rare, and the stream that last wrote the floats
  // may be gone by then (save_state has none).
  std::vector<float> to_host() const;
  // The same into size() floats at `host`.
  void download(float* host) const;
  // Empty, in host memory; device memory is freed.
  void release() noexcept;

 private:
  // Device memory for n floats on at's GPU, the values unspecified; kept
  // when the array already is that.
  void place_on_gpu(const Where& at, size_t n);

  const char* who_;
  std::vector<float> host_;
  float* device_ = nullptr;  // non-NULL: the floats are on GPU device_id_
  int device_id_ = -1;
  size_t n_ = 0;
};

// The arrays of a family by key (a bucket index, a parameter id), N per
// key: quantization's own and owner residuals, an optimizer's three slots,
// PowerSGD's P, Q and error. Ordered by key, so a checkpoint written from
// to_host() does not depend on hash order.
template <class Key, size_t N>
class ResidentTable {
 public:
  using Arrays = std::array<ResidentFloats, N>;
  using HostArrays = std::array<std::vector<float>, N>;
  using Map = std::map<Key, Arrays>;

  explicit ResidentTable(const char* who) : who_(who) {}

  // key's arrays, empty host arrays when the key is new.
  Arrays& operator[](const Key& key) {
    auto found = map_.find(key);
    if (found == map_.end()) found = map_.emplace(key, fresh()).first;
    return found->second;
  }
  // key's arrays, or NULL.
  Arrays* find(const Key& key) {
    auto found = map_.find(key);
    return found == map_.end() ? nullptr : &found->second;
  }
  void erase(const Key& key) { map_.erase(key); }
  bool empty() const { return map_.empty(); }
  typename Map::iterator begin() { return map_.begin(); }
  typename Map::iterator end() { return map_.end(); }
  typename Map::const_iterator begin() const { return map_.begin(); }
  typename Map::const_iterator end() const { return map_.end(); }

  // Host copies of every key's arrays (save_state).
  std::map<Key, HostArrays> to_host() const {
    std::map<Key, HostArrays> out;
    for (const auto& kv : map_) {
      HostArrays& h = out[kv.first];
      for (size_t i = 0; i < N; ++i) h[i] = kv.second[i].to_host();
    }
    return out;
  }
  // Every key's arrays become the host values given (load_state); keys not
  // given are dropped. Nothing changes if it throws.
  void replace(std::map<Key, HostArrays> host) {
    Map next;
    for (auto& kv : host) {
      Arrays& a = next.emplace(kv.first, fresh()).first->second;
      for (size_t i = 0; i < N; ++i) a[i].set_host(std::move(kv.second[i]));
    }
    map_ = std::move(next);
  }
  // Every array into at's memory, values kept (the buckets changed device).
  void move_all_to(const Where& at) {
    for (auto& kv : map_)
      for (ResidentFloats& a : kv.second) a.move_to(at);
  }
  // Frees every array and forgets every key.
  void clear() { map_.clear(); }

 private:
  Arrays fresh() const { return fresh(std::make_index_sequence<N>()); }
  template <size_t... I>
  Arrays fresh(std::index_sequence<I...>) const {
    return Arrays{{(void(I), ResidentFloats(who_))...}};
  }

  const char* who_;
  Map map_;
};

}  // namespace ddph
