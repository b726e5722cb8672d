#include "plugins/powersgd/resident_factors.h"

#include <utility>

#include "core/base/error.h"

namespace ddph {
namespace powersgd {
namespace {

// error -= P Q^T over the deferred matrices (host memory).
void settle(const ResidentFactors::Deferred& d, float* error) {
  LowRankOps& host = cpu_ops();
  for (const MatrixSlot& s : d.matrices)
    host.reconstruct(d.p.data() + s.p_offset, d.q.data() + s.q_offset, s.rows, s.cols, s.r, nullptr,
                     error + s.offset);
}

void check_length(size_t have, size_t want, uint64_t index, const char* what, int rank,
                  const char* name) {
  DDPH_CHECK(have == want, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name << ": bucket " << index << " remembers " << have << " floats of "
                         << what << " (from a checkpoint or an earlier layout), "
                         << "but its layout at rank " << rank << " needs " << want);
}

}  // namespace

void ResidentFactors::use(const Where& at, LowRankOps& ops) {
  // Deferred errors exist only while the steps run on the host; their
  // buffers are host memory until the next touch moves them.
  if (at.cuda() && !deferred_.empty()) {
    for (const auto& kv : deferred_) settle(kv.second, arrays_[kv.first][kError].data());
    deferred_.clear();
  }
  at_ = at;
  ops_ = &ops;
}

ResidentTable<uint64_t, 3>::Arrays& ResidentFactors::arrays(uint64_t index) {
  Table::Arrays& a = arrays_[index];
  for (ResidentFloats& f : a) f.move_to(at_);
  return a;
}

float* ResidentFactors::error_buffer(uint64_t index, size_t n, const char* name) {
  ResidentFloats& e = arrays(index)[kError];
  if (e.empty()) e.zeros(at_, n);
  DDPH_CHECK(e.size() == n, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name << ": bucket " << index << " has an error buffer of " << e.size()
                         << " floats (from a checkpoint or an earlier layout), but needs " << n);
  return e.data();
}

Factors ResidentFactors::fresh_factors(uint64_t index, size_t p_numel,
                                       const std::vector<float>& q_host) {
  Table::Arrays& a = arrays(index);
  with_factors_.insert(index);
  // fit keeps the memory of the last draw: no allocation per step.
  a[kP].fit(at_, p_numel);
  ops_->zero(a[kP].data(), p_numel);
  a[kQ].fit(at_, q_host.size());
  // On a GPU through pinned staging (cuda/pinned_uploads.h): no host wait.
  ops_->upload(a[kQ].data(), q_host.data(), q_host.size());
  return Factors{a[kP].data(), a[kQ].data()};
}

Factors ResidentFactors::remembered_factors(uint64_t index, size_t p_numel, size_t q_numel,
                                            int rank, const char* name) {
  Table::Arrays& a = arrays(index);
  check_length(a[kP].size(), p_numel, index, "P", rank, name);
  check_length(a[kQ].size(), q_numel, index, "Q", rank, name);
  return Factors{a[kP].data(), a[kQ].data()};
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
  settle(d->second, arrays(index)[kError].data());
  deferred_.erase(d);
  return nullptr;
}

bool ResidentFactors::take_error(uint64_t index, size_t numel, const char* name,
                                 std::vector<float>* host) {
  Table::Arrays* a = arrays_.find(index);
  if (a == nullptr || (*a)[kError].empty()) return false;
  ResidentFloats& error = (*a)[kError];
  DDPH_CHECK(error.size() == numel, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name << ": take_residual: bucket " << index << " keeps an error of "
                         << error.size() << " floats, but the bucket given needs " << numel
                         << "; it must have the layout this hook last reduced");
  *host = error.to_host();
  auto d = deferred_.find(index);
  if (d != deferred_.end()) settle(d->second, host->data());
  deferred_.erase(index);
  error.release();
  return true;
}

std::map<uint64_t, SavedBucket> ResidentFactors::to_host() const {
  std::map<uint64_t, SavedBucket> out;
  for (const auto& kv : arrays_) {
    SavedBucket& m = out[kv.first];
    // P and Q absent (cleared without warm start) stay absent whatever
    // memory their arrays still hold.
    m.has_pq = has_factors(kv.first);
    if (m.has_pq) {
      m.p = kv.second[kP].to_host();
      m.q = kv.second[kQ].to_host();
    }
    m.error = kv.second[kError].to_host();
    auto d = deferred_.find(kv.first);
    if (d != deferred_.end()) settle(d->second, m.error.data());
  }
  return out;
}

void ResidentFactors::replace(std::map<uint64_t, SavedBucket> host) {
  std::map<uint64_t, Table::HostArrays> arrays;
  std::set<uint64_t> with_factors;
  for (auto& kv : host) {
    if (kv.second.has_pq) with_factors.insert(kv.first);
    arrays[kv.first] = {std::move(kv.second.p), std::move(kv.second.q), std::move(kv.second.error)};
  }
  arrays_.replace(std::move(arrays));
  with_factors_ = std::move(with_factors);
  // A deferred error lived in a replaced buffer.
  deferred_.clear();
}

}  // namespace powersgd
}  // namespace ddph
