#include "plugins/powersgd/resident_factors.h"

#include <utility>

#include "core/base/error.h"

namespace ddph {
namespace powersgd {

ResidentFactors::~ResidentFactors() {
  release_all();
}

void ResidentFactors::move_to(LowRankOps* ops) {
  if (ops_ == ops) return;
  evict_to_host();
  ops_ = ops;
}

ResidentFactors::Resident& ResidentFactors::resident(uint64_t index) {
  auto it = resident_.find(index);
  if (it != resident_.end()) return it->second;
  // First touch in this memory: what the host holds (a checkpoint, or an
  // earlier memory's values) moves in, once.
  BucketMemory& m = host_[index];
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
    for (Array* a : to) ops_->release(a->data);
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

void ResidentFactors::fit(Array& a, size_t n) {
  if (a.size == n && (n == 0 || a.data != nullptr)) return;
  ops_->release(a.data);
  a.data = nullptr;
  a.size = 0;
  a.data = ops_->allocate(n);
  a.size = n;
}

void ResidentFactors::download_into(uint64_t index, const Resident& r, BucketMemory& m) {
  // P and Q absent (cleared without warm start) stay absent whatever
  // memory their arrays still hold.
  if (m.has_pq) {
    m.p.resize(r.p.size);
    ops_->download(m.p.data(), r.p.data, r.p.size);
    m.q.resize(r.q.size);
    ops_->download(m.q.data(), r.q.data, r.q.size);
  }
  m.error.resize(r.error.size);
  ops_->download(m.error.data(), r.error.data, r.error.size);
  auto d = deferred_.find(index);
  if (d != deferred_.end()) settle(d->second, m.error.data());
}

void ResidentFactors::settle(const Deferred& d, float* error) {
  LowRankOps& host = cpu_ops();
  for (const MatrixSlot& s : d.matrices)
    host.reconstruct(d.p.data() + s.p_offset, d.q.data() + s.q_offset, s.rows, s.cols, s.r, nullptr,
                     error + s.offset);
}

void ResidentFactors::defer_error(uint64_t index, const std::vector<MatrixSlot>& matrices,
                                  const Factors& f, size_t p_numel, size_t q_numel) {
  Deferred& d = deferred_[index];
  d.matrices = matrices;
  d.p.assign(f.p, f.p + p_numel);
  d.q.assign(f.q, f.q + q_numel);
}

const ResidentFactors::Deferred* ResidentFactors::deferred_error(
    uint64_t index, const std::vector<MatrixSlot>& matrices) {
  auto d = deferred_.find(index);
  if (d == deferred_.end()) return nullptr;
  if (d->second.matrices == matrices) return &d->second;
  settle(d->second, resident(index).error.data);
  deferred_.erase(d);
  return nullptr;
}

void ResidentFactors::evict_to_host() {
  for (const auto& kv : resident_) download_into(kv.first, kv.second, host_[kv.first]);
  release_all();
}

void ResidentFactors::release_all() {
  for (auto& kv : resident_)
    for (Array* a : {&kv.second.p, &kv.second.q, &kv.second.error}) ops_->release(a->data);
  resident_.clear();
  // A deferred error lives in its resident buffer: evict_to_host has
  // settled it into the host copy, and replace() replaces it.
  deferred_.clear();
}

float* ResidentFactors::error_buffer(uint64_t index, size_t n) {
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

Factors ResidentFactors::fresh_factors(uint64_t index, size_t p_numel,
                                       const std::vector<float>& q_host) {
  Resident& r = resident(index);
  host_[index].has_pq = true;
  fit(r.p, p_numel);
  ops_->zero(r.p.data, p_numel);
  fit(r.q, q_host.size());
  // On a GPU through pinned staging (cuda/pinned_uploads.h): no host wait.
  ops_->upload(r.q.data, q_host.data(), q_host.size());
  return Factors{r.p.data, r.q.data};
}

Factors ResidentFactors::remembered_factors(uint64_t index, size_t p_numel, size_t q_numel,
                                            int rank) {
  Resident& r = resident(index);
  check_length(r.p.size, p_numel, index, "P", rank);
  check_length(r.q.size, q_numel, index, "Q", rank);
  return Factors{r.p.data, r.q.data};
}

void ResidentFactors::check_length(size_t have, size_t want, uint64_t index, const char* what,
                                   int rank) {
  DDPH_CHECK(have == want, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name_ << ": bucket " << index << " remembers " << have << " floats of "
                         << what << " (from a checkpoint or an earlier layout), "
                         << "but its layout at rank " << rank << " needs " << want);
}

void ResidentFactors::forget_factors() {
  for (auto& kv : host_) {
    kv.second.has_pq = false;
    kv.second.p.clear();
    kv.second.q.clear();
  }
}

std::map<uint64_t, BucketMemory> ResidentFactors::to_host() {
  std::map<uint64_t, BucketMemory> out = host_;
  for (const auto& kv : resident_) download_into(kv.first, kv.second, out[kv.first]);
  return out;
}

void ResidentFactors::replace(std::map<uint64_t, BucketMemory> host) {
  release_all();
  host_ = std::move(host);
}

}  // namespace powersgd
}  // namespace ddph
