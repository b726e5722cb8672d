#include "loader/agreement/rank_agreement.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/base/error.h"
#include "core/base/le_bytes.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {
namespace loader {
namespace {

void describe_chain(const ResolvedHook& h, std::ostringstream& out) {
  out << h.plugin->family() << "/" << h.hook->name << "{";
  for (size_t i = 0; i < h.options.size(); ++i) {
    const ddph_option_t& o = h.options.data()[i];
    out << o.name << "=";
    switch (o.type) {
      case DDPH_BOOL:
        out << (o.value.b ? "true" : "false");
        break;
      case DDPH_INT:
        out << o.value.i;
        break;
      case DDPH_FLOAT:
        out << std::hexfloat << o.value.f << std::defaultfloat;  // exact
        break;
      default:
        out << '"' << (o.value.s ? o.value.s : "") << '"';
    }
    out << ";";
  }
  out << "}";
  if (h.inner) {
    out << " wrapping ";
    describe_chain(*h.inner, out);
  }
}

// Every rank's `mine` (n int64 values), gathered.
std::vector<int64_t> gather(ddph_comm_t* comm, const int64_t* mine, size_t n) {
  std::vector<int64_t> all(n * size_t(comm_size(comm)));
  FlatTensor send(const_cast<int64_t*>(mine), DType::I64, int64_t(n));
  FlatTensor recv(all.data(), DType::I64, int64_t(all.size()));
  comm_allgather(comm, send, recv, nullptr);
  return all;
}

std::string dtype_text(int64_t code, int64_t bits, int64_t lanes) {
  DLDataType t{uint8_t(code), uint8_t(bits), uint16_t(lanes)};
  char buf[32];
  return dl_dtype_text(t, buf);
}

std::string packed_dtype_text(int64_t packed) {
  return dtype_text(packed >> 32, (packed >> 16) & 0xffff, packed & 0xffff);
}

std::string device_text(int64_t type) {
  switch (type) {
    case kDLCPU:
      return "the CPU";
    case kDLCUDA:
      return "CUDA";
    case kDLCUDAHost:
      return "CUDA host memory";
    default:
      return "device type " + std::to_string(type);
  }
}

uint64_t fold(uint64_t digest, const BucketFingerprint& fp) {
  int64_t words[1 + kFingerprintWords];
  words[0] = int64_t(digest);
  std::memcpy(words + 1, &fp, sizeof fp);
  return fnv1a64(words, sizeof words);
}

// "1st", "2nd", "3rd", "4th", ... "11th", "21st".
std::string ordinal(size_t n) {
  const size_t tens = n % 100, ones = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : ones == 1                ? "st"
                       : ones == 2                ? "nd"
                       : ones == 3                ? "rd"
                                                  : "th";
  return std::to_string(n) + suffix;
}

// After the job agreement found a rank whose own settings are refused:
// every rank's reason (empty where it has none), gathered as text of up to
// kReasonWords words, so that every rank throws the same error naming them.
[[noreturn]] void refuse_local_errors(ddph_comm_t* comm, const std::string& mine) {
  constexpr size_t kReasonWords = 48;
  std::vector<int64_t> words(kReasonWords, 0);
  std::memcpy(words.data(), mine.data(), std::min(mine.size(), kReasonWords * 8 - 1));
  const std::vector<int64_t> all = gather(comm, words.data(), kReasonWords);
  std::ostringstream reasons;
  for (size_t r = 0; r * kReasonWords < all.size(); ++r) {
    const char* text = reinterpret_cast<const char*>(all.data() + r * kReasonWords);
    const std::string reason(text, strnlen(text, kReasonWords * 8));
    if (!reason.empty())
      reasons << (reasons.tellp() > 0 ? "; " : "") << "rank " << r << ": " << reason;
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT,
            "the job cannot start, every rank stops: " << reasons.str() << " (this rank is "
                                                       << comm_rank(comm) << ")");
}

}  // namespace

std::string job_signature(const Job& job) {
  std::ostringstream out;
  if (job.auto_choice) {
    // The settings too: ranks that decide differently would pair buckets
    // of different candidates.
    const AutoSettings& a = job.auto_choice->settings;
    out << "auto{warmup=" << a.warmup_steps << ";share=" << std::hexfloat << a.explore_share
        << ";recheck=" << a.recheck_steps << ";drift=" << a.drift << ";norm_jump=" << a.norm_jump
        << ";hold=" << a.hold_steps << ";max=" << a.max_compression
        << ";lossy_margin=" << a.lossy_margin << ";deterministic=" << a.deterministic
        << ";link=" << a.link_mbit << std::defaultfloat << "}:";
    for (size_t i = 0; i < job.auto_choice->candidates.size(); ++i) {
      out << " " << job.auto_choice->specs[i].info.name << "=";
      describe_chain(*job.auto_choice->candidates[i], out);
    }
  } else {
    describe_chain(*job.hook, out);
  }
  for (const ResolvedRule& rule : job.rules) {
    out << "; rule <= " << rule.max_bytes << ": ";
    describe_chain(*rule.hook, out);
  }
  out << "; bucket_check=" << bucket_check_name(job.config.comm.bucket_check);
  return out.str();
}

void agree_on_job(ddph_comm_t* comm, const Job& job, const std::string& local_error) {
  if (comm_size(comm) == 1) {
    DDPH_CHECK(local_error.empty(), DDPH_INVALID_ARGUMENT, local_error);
    return;
  }
  const std::string text = job_signature(job);
  const int64_t mine[2] = {int64_t(fnv1a64(text.data(), text.size())), !local_error.empty()};
  const std::vector<int64_t> all = gather(comm, mine, 2);
  for (size_t r = 0; r < all.size(); r += 2)
    if (all[r + 1] != 0) refuse_local_errors(comm, local_error);
  std::string differ;
  for (size_t r = 2; r < all.size(); r += 2)
    if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r / 2);
  DDPH_CHECK(differ.empty(), DDPH_INVALID_ARGUMENT,
             "the ranks disagree on the hook configuration: rank"
                 << (differ.find(',') == std::string::npos ? " " : "s ") << differ
                 << " differ from rank 0 (this rank, " << comm_rank(comm) << ", has " << text
                 << ")");
}

BucketFingerprint fingerprint_of(const ddph_bucket_t& bucket) {
  const DLTensor& b = bucket.buffer;
  BucketFingerprint fp;
  fp.index = int64_t(bucket.index);
  fp.step = int64_t(bucket.step);
  fp.numel = numel(b);
  fp.dtype = int64_t(b.dtype.code) << 32 | int64_t(b.dtype.bits) << 16 | b.dtype.lanes;
  fp.device = int64_t(b.device.device_type);
  return fp;
}

uint64_t bucket_bytes(const ddph_bucket_t& bucket) {
  const DLTensor& t = bucket.buffer;
  const uint64_t bits = uint64_t(t.dtype.bits) * (t.dtype.lanes ? t.dtype.lanes : 1);
  return uint64_t(numel(t)) * ((bits + 7) / 8);
}

std::string describe_bucket(const BucketFingerprint& fp) {
  if (fp.index < 0) return "no bucket (while the hooks were created)";
  std::ostringstream s;
  s << "bucket " << fp.index << " of step " << fp.step << " (" << fp.numel << " "
    << packed_dtype_text(fp.dtype) << " elements on " << device_text(fp.device) << ")";
  return s.str();
}

std::vector<CheckRecord> gather_records(ddph_comm_t* comm, const CheckRecord& mine) {
  int64_t words[kCheckRecordWords];
  std::memcpy(words, &mine, sizeof words);
  const std::vector<int64_t> flat = gather(comm, words, kCheckRecordWords);
  std::vector<CheckRecord> all(flat.size() / kCheckRecordWords);
  std::memcpy(static_cast<void*>(all.data()), flat.data(), all.size() * sizeof(CheckRecord));
  return all;
}

int first_differing_rank(const std::vector<CheckRecord>& all, int rank) {
  const CheckRecord& mine = all[size_t(rank)];
  for (size_t r = 0; r < all.size(); ++r)
    if (std::memcmp(&all[r], &mine, sizeof mine) != 0) return int(r);
  return -1;
}

std::string describe_records(const CheckRecord& mine, int rank, const CheckRecord& theirs,
                             int other) {
  const bool my_call = mine.kind == int64_t(CheckKind::kCall);
  const bool their_call = theirs.kind == int64_t(CheckKind::kCall);
  std::ostringstream s;
  s << "this rank (rank " << rank << ") ";
  if (my_call)
    s << "calls " << describe_call(mine.call) << " in the hook of " << describe_bucket(mine.bucket);
  else
    s << "is about to run " << describe_bucket(mine.bucket);
  s << ", where rank " << other << " ";
  if (their_call)
    s << (my_call ? "" : "is still in a hook: it ") << "calls " << describe_call(theirs.call)
      << " in the hook of " << describe_bucket(theirs.bucket);
  else
    s << (my_call ? "has left its hook and " : "") << "is about to run "
      << describe_bucket(theirs.bucket);
  return s.str();
}

void PendingBatch::add(const BucketFingerprint& fp, uint64_t bytes) {
  list_.push_back(fp);
  digest_ = fold(digest_, fp);
  bytes_ += bytes;
}

bool PendingBatch::due(const AutoCheckPolicy& policy, uint64_t bytes, bool is_last) const {
  return bytes >= policy.check_before_bytes || is_last || list_.size() >= policy.batch_buckets ||
         bytes_ >= policy.batch_bytes;
}

void PendingBatch::clear() {
  list_.clear();
  digest_ = 0;
  bytes_ = 0;
}

namespace {

// After the digests differ (auto): every rank's batch, to name the first
// bucket that differs. Collective; always throws.
[[noreturn]] void name_difference(ddph_comm_t* control, const std::vector<CheckRecord>& all,
                                  const std::vector<BucketFingerprint>& my_list,
                                  size_t batch_buckets) {
  // Each rank's count, then up to batch_buckets fingerprints (padded).
  const size_t per_rank = 1 + batch_buckets * kFingerprintWords;
  const size_t n = std::min(my_list.size(), batch_buckets);
  std::vector<int64_t> mine(per_rank, -1);
  mine[0] = int64_t(n);
  std::memcpy(mine.data() + 1, my_list.data(), n * sizeof(BucketFingerprint));
  const std::vector<int64_t> lists = gather(control, mine.data(), mine.size());
  const int rank = comm_rank(control);
  auto entry = [&](int r, size_t i, BucketFingerprint* out) {
    const int64_t* base = lists.data() + size_t(r) * per_rank;
    if (i >= size_t(base[0])) return false;
    std::memcpy(static_cast<void*>(out), base + 1 + i * kFingerprintWords, sizeof *out);
    return true;
  };
  for (int r = 0; r < int(all.size()); ++r) {
    if (r == rank || std::memcmp(&all[size_t(r)], &all[size_t(rank)], sizeof(CheckRecord)) == 0)
      continue;
    for (size_t i = 0;; ++i) {
      BucketFingerprint a, b;
      const bool has_a = entry(rank, i, &a), has_b = entry(r, i, &b);
      if (has_a && has_b && a == b) continue;
      if (!has_a && !has_b) break;  // equal lists: digests collided
      auto ran = [&](bool has, const BucketFingerprint& fp, int who) {
        return has ? "submitted " + describe_bucket(fp)
                   : "submitted no more buckets (it checked after " +
                         std::to_string(lists[size_t(who) * per_rank]) + ")";
      };
      std::ostringstream why;
      why << "the ranks submitted different buckets: this rank (rank " << rank << ") "
          << ran(has_a, a, rank) << " where rank " << r << " " << ran(has_b, b, r) << ", as the "
          << ordinal(i + 1) << " bucket since the last check; every rank must submit the same "
          << "buckets in the same order. No rank ran the bucket it checked this at (here "
          << describe_bucket(my_list.back()) << ")";
      if (n > 1)
        why << "; the " << n - 1 << " bucket" << (n > 2 ? "s" : "")
            << " this rank ran since the last check may hold means of different buckets: do "
               "not use this step's results";
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, why.str());
    }
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT,
            "the ranks submitted different buckets, but the same ones since the last check "
            "(a digest collision); every rank must submit the same buckets in the same order");
}

}  // namespace

void compare_batch(ddph_comm_t* control, const PendingBatch& batch, BucketCheck mode,
                   size_t batch_buckets, bool* out_of_step) {
  CheckRecord mine;
  mine.kind = int64_t(CheckKind::kBuckets);
  mine.digest = batch.digest();
  mine.count = int64_t(batch.list().size());
  mine.bucket = batch.list().back();
  const std::vector<CheckRecord> all = gather_records(control, mine);
  const int rank = comm_rank(control);
  const int other = first_differing_rank(all, rank);
  if (other < 0) return;
  // Every rank sees the same records, so every rank takes the same branch.
  bool calls = false;
  for (const CheckRecord& r : all) calls = calls || r.kind != int64_t(CheckKind::kBuckets);
  if (calls) {
    *out_of_step = true;
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, "the ranks are out of step: "
                                         << describe_records(mine, rank, all[size_t(other)], other)
                                         << "; the hooks made different numbers of calls "
                                            "(comm.bucket_check: strict). The session stops: "
                                            "close it");
  }
  if (mode == BucketCheck::kStrict)
    DDPH_FAIL(DDPH_INVALID_ARGUMENT,
              "the ranks submitted different buckets: "
                  << describe_records(mine, rank, all[size_t(other)], other)
                  << "; every rank must submit the same buckets in the same order. The bucket "
                     "did not run on any rank (comm.bucket_check: strict)");
  name_difference(control, all, batch.list(), batch_buckets);
}

void BucketAgreement::configure(BucketCheck mode, bool survives_mismatch, AutoCheckPolicy policy) {
  mode_ = mode;
  survives_mismatch_ = survives_mismatch;
  policy_ = policy;
  pending_.clear();
}

void BucketAgreement::before_hook(ddph_comm_t* control, const BucketFingerprint& fp, uint64_t bytes,
                                  bool is_last) {
  if (mode_ == BucketCheck::kOff) return check_layout(control, fp);
  if (comm_size(control) == 1) return;
  if (mode_ == BucketCheck::kStrict) pending_.clear();  // every bucket on its own
  pending_.add(fp, bytes);
  bool due = mode_ == BucketCheck::kStrict || pending_.due(policy_, bytes, is_last);
  if (!due && !survives_mismatch_) {
    // Ranks that disagree on this bucket's length could abort the process
    // in the hook's first call: a new layout is checked before it runs.
    auto known = agreed_.find(uint64_t(fp.index));
    due =
        known == agreed_.end() || known->second != Layout{fp.index, fp.numel, fp.dtype, fp.device};
  }
  if (!due) return;
  try {
    compare_batch(control, pending_, mode_, policy_.batch_buckets, &out_of_step_);
  } catch (...) {
    pending_.clear();
    throw;
  }
  if (!survives_mismatch_)
    for (const BucketFingerprint& f : pending_.list())
      agreed_[uint64_t(f.index)] = Layout{f.index, f.numel, f.dtype, f.device};
  pending_.clear();
}

void BucketAgreement::check_layout(ddph_comm_t* comm, const BucketFingerprint& fp) {
  const Layout mine = {fp.index, fp.numel, fp.dtype, fp.device};
  auto known = agreed_.find(uint64_t(fp.index));
  if (known != agreed_.end() && known->second == mine) return;
  const int world = comm_size(comm);
  if (world > 1) {
    const std::vector<int64_t> all = gather(comm, mine.data(), mine.size());
    for (int r = 0; r < world; ++r) {
      const int64_t* theirs = all.data() + size_t(r) * mine.size();
      if (std::equal(mine.begin(), mine.end(), theirs)) continue;
      auto what = [](const int64_t* l) {
        std::ostringstream s;
        s << "bucket " << l[0] << " of " << l[1] << " " << packed_dtype_text(l[2])
          << " elements on device type " << l[3];
        return s.str();
      };
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, "the ranks submitted different buckets: rank "
                                           << comm_rank(comm) << " has " << what(mine.data())
                                           << ", rank " << r << " has " << what(theirs)
                                           << "; every rank must submit the same "
                                              "buckets in the same order");
    }
  }
  agreed_[uint64_t(fp.index)] = mine;
}

}  // namespace loader
}  // namespace ddph
