#include "plugins/powersgd/hook_base.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/base/host.h"
#include "core/base/tensor.h"
#include "core/hook/comm_call.h"
#include "plugins/powersgd/huge_values.h"

namespace ddph {
namespace powersgd {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PsgdHook::PsgdHook(const ddph_hook_init_t& init, const char* name, HookKind kind)
    : name_(name),
      comm_(init.comm),
      world_(comm_size(init.comm)),
      opts_(parse_options(init, kind == HookKind::kLayerwise)),
      kind_(kind) {
  state_.rng.seed_with(uint32_t(opts_.seed));
}

PsgdHook::~PsgdHook() {
  release_all();
}

void PsgdHook::run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) {
  char text[32];
  DDPH_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, DDPH_UNSUPPORTED,
             "powersgd/" << name_ << ": bucket dtype " << dl_dtype_text(bucket.buffer.dtype, text)
                         << " is not supported (float32, or float16/bfloat16 as the "
                            "fp16_wrapper/bf16_wrapper hand it)");
  bind(bucket);
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = size_t(bucket.buffer.shape[0]);
  count_in(n * dtype_size(dtype));
  void* data = data_ptr(bucket.buffer);
  if (n > 0 && state_.iter < opts_.start_iter) {
    // PyTorch's allreduce_hook: divide first, then sum (DDPH_AVG).
    FlatTensor buf(data, dtype, int64_t(n), at_.device);
    count_out(n * dtype_size(dtype));
    count_compression(n, n, dtype);
    const auto c0 = std::chrono::steady_clock::now();
    comm_allreduce(comm_, buf, DDPH_AVG, at_.stream);
    step_comm_s_ += seconds_since(c0);
  } else if (n > 0) {
    // One host buffer for every bucket (index 0): buckets run one at a time.
    ScratchBuffers::Lease work = work_.get(at_, 0, dtype == DType::F32 ? 0 : n * sizeof(float));
    float* x = static_cast<float*>(data);
    if (dtype != DType::F32) {
      x = static_cast<float*>(work.data());
      cast_into(at_, dtype, data, DType::F32, x, n);
    }
    compress(bucket, x, n, dtype);
    if (dtype != DType::F32) cast_into(at_, DType::F32, x, dtype, data, n);
    // PyTorch clears every bucket's P and Q after each step without warm
    // start. Resident arrays keep their memory for the next fresh draw.
    if (!opts_.warm_start)
      for (auto& kv : state_.buckets) {
        kv.second.has_pq = false;
        kv.second.p.clear();
        kv.second.q.clear();
      }
  }
  step_total_s_ += seconds_since(t0);
  finish_step(bucket);
  done.ok();
}

void PsgdHook::bind(const ddph_bucket_t& bucket) {
  at_ = where_of(bucket);
  LowRankOps* want = &cpu_ops();
  if (at_.cuda()) {
    const int device = at_.device.device_id;
    if (cuda_ops_ == nullptr || cuda_device_ != device) {
      // Another GPU: its memory cannot serve as this one's, so the state
      // goes through the host (rare: a hook normally stays on one device).
      evict_to_host();
      if (resident_ops_ == cuda_ops_.get()) resident_ops_ = nullptr;  // not left dangling
      cuda_ops_.reset();
      cuda_ops_ = make_cuda_ops(device);
      cuda_device_ = device;
    }
    want = cuda_ops_.get();
  }
  if (resident_ops_ != want) {
    evict_to_host();
    resident_ops_ = want;
  }
  ops_ = want;
  ops_->set_stream(at_.stream);
}

PsgdHook::Resident& PsgdHook::resident(uint64_t index) {
  auto it = resident_.find(index);
  if (it != resident_.end()) return it->second;
  // First touch in this memory: what the state holds (a checkpoint, or an
  // earlier memory's values) moves in, once.
  BucketMemory& m = state_.buckets[index];
  Resident& r = resident_[index];
  const std::vector<float>* from[3] = {&m.p, &m.q, &m.error};
  Array* to[3] = {&r.p, &r.q, &r.error};
  try {
    for (int k = 0; k < 3; ++k) {
      fit(*to[k], from[k]->size());
      ops_->upload(to[k]->data, from[k]->data(), from[k]->size());
    }
  } catch (...) {
    // The host copies are still the state; a later step must upload them
    // again rather than find this half-made entry.
    for (Array* a : to) resident_ops_->release(a->data);
    resident_.erase(index);
    throw;
  }
  // upload() is done with the host memory when it returns, so the host
  // copies can go now.
  m.p = std::vector<float>();
  m.q = std::vector<float>();
  m.error = std::vector<float>();
  return r;
}

void PsgdHook::fit(Array& a, size_t n) {
  if (a.size == n && (n == 0 || a.data != nullptr)) return;
  resident_ops_->release(a.data);
  a.data = nullptr;
  a.size = 0;
  a.data = resident_ops_->allocate(n);
  a.size = n;
}

void PsgdHook::download_into(uint64_t index, const Resident& r, BucketMemory& m) {
  // P and Q absent (cleared without warm start) stay absent whatever
  // memory their arrays still hold.
  if (m.has_pq) {
    m.p.resize(r.p.size);
    resident_ops_->download(m.p.data(), r.p.data, r.p.size);
    m.q.resize(r.q.size);
    resident_ops_->download(m.q.data(), r.q.data, r.q.size);
  }
  m.error.resize(r.error.size);
  resident_ops_->download(m.error.data(), r.error.data, r.error.size);
  auto d = deferred_.find(index);
  if (d != deferred_.end()) settle(d->second, m.error.data());
}

void PsgdHook::settle(const Deferred& d, float* error) {
  LowRankOps& host = cpu_ops();
  for (const MatrixSlot& s : d.matrices)
    host.reconstruct(d.p.data() + s.p_offset, d.q.data() + s.q_offset, s.rows, s.cols, s.r, nullptr,
                     error + s.offset);
}

void PsgdHook::defer_error(uint64_t index, const std::vector<MatrixSlot>& matrices,
                           const Factors& f, size_t p_numel, size_t q_numel) {
  Deferred& d = deferred_[index];
  d.matrices = matrices;
  d.p.assign(f.p, f.p + p_numel);
  d.q.assign(f.q, f.q + q_numel);
}

const PsgdHook::Deferred* PsgdHook::deferred_error(uint64_t index,
                                                   const std::vector<MatrixSlot>& matrices) {
  auto d = deferred_.find(index);
  if (d == deferred_.end()) return nullptr;
  if (d->second.matrices == matrices) return &d->second;
  settle(d->second, resident(index).error.data);
  deferred_.erase(d);
  return nullptr;
}

void PsgdHook::evict_to_host() {
  for (const auto& kv : resident_) download_into(kv.first, kv.second, state_.buckets[kv.first]);
  release_all();
}

void PsgdHook::release_all() {
  for (auto& kv : resident_)
    for (Array* a : {&kv.second.p, &kv.second.q, &kv.second.error}) resident_ops_->release(a->data);
  resident_.clear();
  // A deferred error lives in its resident buffer: evict_to_host has
  // settled it into the state, and load_state replaces it.
  deferred_.clear();
}

float* PsgdHook::error_buffer(uint64_t index, size_t n) {
  Array& e = resident(index).error;
  if (e.size == 0) {
    fit(e, n);
    ops_->zero(e.data, n);
  }
  DDPH_CHECK(e.size == n, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name_ << ": bucket " << index << " has an error buffer of " << e.size
                         << " floats (from a checkpoint or an earlier layout), but needs " << n);
  return e.data;
}

bool PsgdHook::wants_fresh_q(uint64_t index) {
  return !opts_.warm_start || !state_.buckets[index].has_pq;
}

PsgdHook::Factors PsgdHook::fresh_factors(uint64_t index, size_t p_numel,
                                          const std::vector<float>& q_host) {
  Resident& r = resident(index);
  state_.buckets[index].has_pq = true;
  fit(r.p, p_numel);
  ops_->zero(r.p.data, p_numel);
  fit(r.q, q_host.size());
  // On a GPU through pinned staging (cuda/pinned_uploads.h): no host wait.
  ops_->upload(r.q.data, q_host.data(), q_host.size());
  return Factors{r.p.data, r.q.data};
}

PsgdHook::Factors PsgdHook::remembered_factors(uint64_t index, size_t p_numel, size_t q_numel) {
  Resident& r = resident(index);
  check_length(r.p.size, p_numel, index, "P");
  check_length(r.q.size, q_numel, index, "Q");
  return Factors{r.p.data, r.q.data};
}

void PsgdHook::check_length(size_t have, size_t want, uint64_t index, const char* what) {
  DDPH_CHECK(have == want, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name_ << ": bucket " << index << " remembers " << have << " floats of "
                         << what << " (from a checkpoint or an earlier layout), "
                         << "but its layout at rank " << opts_.rank << " needs " << want);
}

void PsgdHook::finish_step(const ddph_bucket_t& bucket) {
  if (!bucket.is_last) return;
  ++state_.iter;
  if (step_before_ > 0) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "step %llu of %s: %llu bytes before compression, %llu after; %.3f ms "
                  "compressing, %.3f ms in collectives",
                  (unsigned long long)state_.iter, name_, (unsigned long long)step_before_,
                  (unsigned long long)step_after_, 1e3 * (step_total_s_ - step_comm_s_),
                  1e3 * step_comm_s_);
    log(DDPH_LOG_DEBUG, "powersgd", text);
  }
  step_before_ = step_after_ = 0;
  step_total_s_ = step_comm_s_ = 0;
}

void PsgdHook::allreduce_sum(float* x, size_t n, DType wire) {
  if (n == 0) return;
  count_out(n * dtype_size(wire));
  const auto c0 = std::chrono::steady_clock::now();
  if (wire == DType::F32) {
    FlatTensor buf(x, DType::F32, int64_t(n), at_.device);
    comm_allreduce(comm_, buf, DDPH_SUM, at_.stream);
    step_comm_s_ += seconds_since(c0);
    return;
  }
  // Under fp16_wrapper/bf16_wrapper the factors travel in 16 bits, as they
  // do under PyTorch's wrappers; the products are computed in fp32.
  ScratchBuffers::Lease low = wire_.get(at_, 0, n * 2);
  cast_into(at_, DType::F32, x, wire, low.data(), n);
  FlatTensor buf(low.data(), wire, int64_t(n), at_.device);
  comm_allreduce(comm_, buf, DDPH_SUM, at_.stream);
  step_comm_s_ += seconds_since(c0);
  cast_into(at_, wire, low.data(), DType::F32, x, n);
}

ScratchBuffers::Lease PsgdHook::unusable_flag() {
  ScratchBuffers::Lease flag = flag_.get(at_, 0, sizeof(float));
  ops_->zero(static_cast<float*>(flag.data()), 1);
  return flag;
}

float PsgdHook::q_limit() const {
  return kFactorLimit / float(opts_.rank);
}

float PsgdHook::uncompressed_scale(DType wire) const {
  if (wire == DType::F16) return 1.0f;
  float up = 1.0f;
  while (up < 2.0f * float(world_)) up *= 2.0f;
  return 1.0f / up;
}

void PsgdHook::average_uncompressed(float* m, bool feedback, float* data, size_t count,
                                    size_t data_count) {
  ScratchBuffers::Lease lease = uncompressed_.get(at_, 0, count * sizeof(float));
  float* mean = static_cast<float*>(lease.data());
  if (feedback) ops_->saturate_overflow(m, data, data_count);
  ops_->copy(mean, m, count);
  count_out(count * sizeof(float));
  const auto c0 = std::chrono::steady_clock::now();
  FlatTensor buf(mean, DType::F32, int64_t(count), at_.device);
  comm_allreduce(comm_, buf, DDPH_AVG, at_.stream);
  step_comm_s_ += seconds_since(c0);
  ops_->copy(data, mean, data_count);
  if (feedback) ops_->fallback_error(m, mean, count);
}

void PsgdHook::divide_by_world(float* x, size_t n) {
  divide_inplace(at_, DType::F32, x, n, world_);
}

void PsgdHook::count_compression(uint64_t numel_before, uint64_t numel_after, DType wire) {
  step_before_ += numel_before * dtype_size(wire);
  step_after_ += numel_after * dtype_size(wire);
}

void PsgdHook::save_state(ddph_write_fn write, void* sink) {
  // Resident arrays are copied out (from a GPU: waiting for the steps
  // ordered before), so the blob is the CPU path's, byte for byte.
  PsgdState out = state_;
  for (const auto& kv : resident_) download_into(kv.first, kv.second, out.buckets[kv.first]);
  const std::string blob = encode_state(out, kind_);
  write(sink, blob.data(), blob.size());
}

void PsgdHook::load_state(const void* bytes, size_t n) {
  PsgdState loaded = decode_state(bytes, n, kind_);  // decoded in full first: all or nothing
  release_all();                                     // the next step uploads the loaded values
  state_ = std::move(loaded);
}

}  // namespace powersgd
}  // namespace ddph
