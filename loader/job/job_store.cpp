#include "loader/job/job_store.h"

#include <openssl/rand.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/base/le_bytes.h"
#include "loader/job/job_secret.h"

namespace ddph {
namespace loader {
namespace {

// Every value in a job's namespace:
//   "DDPHKEY1"  magic
//   u8          flags (1: signed)
//   u32 rank, u32 pid, u32 host length, host bytes: who wrote it
//   u64 payload length, payload
//   32 bytes    HMAC-SHA256 under the job's secret of (key, 0, every byte
//               above), when signed
constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'K', 'E', 'Y', '1'};
constexpr uint8_t kSigned = 1;
constexpr size_t kMacBytes = 32;
constexpr size_t kNonceBytes = 16;  // random; written as 32 hex digits
constexpr size_t kNonceChars = 2 * kNonceBytes;

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

std::string utc_text(uint64_t unix_ms) {
  const time_t t = time_t(unix_ms / 1000);
  tm parts{};
  char buf[32] = "?";
  if (gmtime_r(&t, &parts) != nullptr) strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &parts);
  return buf;
}

uint64_t unix_ms_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  DDPH_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(&raw[0]), int(bytes)) == 1, DDPH_INTERNAL,
             "cannot draw random bytes for the run's nonce (OpenSSL RAND_bytes failed)");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

// A value's writer and payload, as its frame claims them.
struct Framed {
  uint32_t rank = 0, pid = 0;
  std::string host, payload;
  bool is_signed = false;
  std::string mac;
  size_t signed_bytes = 0;  // the bytes the MAC covers (after the key)
  std::string who() const {
    return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + " on host " + host +
           ")";
  }
};

Framed parse_frame(const std::string& key, const std::string& value, const std::string& store) {
  const std::string blob = "the value of key '" + key + "' in " + store;
  try {
    LeReader r(value.data(), value.size(), blob.c_str());
    const uint8_t* magic = r.take(sizeof kMagic, "magic");
    DDPH_CHECK(std::equal(kMagic, kMagic + sizeof kMagic, magic), DDPH_INVALID_ARGUMENT,
               "wrong magic");
    Framed f;
    const uint64_t flags = r.get(1, "flags");
    f.is_signed = (flags & kSigned) != 0;
    f.rank = uint32_t(r.get(4, "writer rank"));
    f.pid = uint32_t(r.get(4, "writer pid"));
    const uint64_t host_len = r.get(4, "host length");
    DDPH_CHECK(host_len <= r.left(), DDPH_INVALID_ARGUMENT, "host length past the end");
    f.host.assign(reinterpret_cast<const char*>(r.take(host_len, "host")), host_len);
    const uint64_t n = r.get(8, "payload length");
    DDPH_CHECK(n <= r.left(), DDPH_INVALID_ARGUMENT, "payload length past the end");
    f.payload.assign(reinterpret_cast<const char*>(r.take(n, "payload")), n);
    f.signed_bytes = value.size() - r.left();
    if (f.is_signed)
      f.mac.assign(reinterpret_cast<const char*>(r.take(kMacBytes, "MAC")), kMacBytes);
    DDPH_CHECK(r.left() == 0, DDPH_INVALID_ARGUMENT, r.left() << " bytes past the end");
    return f;
  } catch (const Error& e) {
    DDPH_FAIL(DDPH_INVALID_ARGUMENT,
              blob << " was not written by this version of ddphooks (" << e.what()
                   << "): another program, or an older ddphooks, uses the same store keys");
  }
}

}  // namespace

JobStore::JobStore(std::unique_ptr<rendezvous::KvStore> kv, JobRun run)
    : kv_(std::move(kv)), run_(std::move(run)) {
  table_.struct_size = sizeof table_;
  table_.ctx = this;
  table_.set = [](void* ctx, const char* key, const void* value, size_t n) {
    return guard([&] {
      static_cast<JobStore*>(ctx)->set(key, std::string(static_cast<const char*>(value), n));
    });
  };
  table_.get = [](void* ctx, const char* key, int64_t timeout_ms, ddph_write_fn write, void* sink) {
    return guard([&] {
      const std::string value = static_cast<JobStore*>(ctx)->get(key, timeout_ms);
      write(sink, value.data(), value.size());
    });
  };
  table_.del = [](void* ctx, const char* key) {
    return guard([&] {
      auto* self = static_cast<JobStore*>(ctx);
      const std::string full = self->full_key(key);
      self->kv_->erase(full, rendezvous::deadline_in(self->run_.timeout));
      std::lock_guard<std::mutex> lock(self->mu_);
      self->wrote_.erase(std::remove(self->wrote_.begin(), self->wrote_.end(), full),
                         self->wrote_.end());
    });
  };
}

JobStore::~JobStore() {
  release();
}

std::string JobStore::frame(const std::string& key, const std::string& payload) const {
  static const std::string host = this_host();
  LeWriter w;
  w.put_bytes(kMagic, sizeof kMagic);
  w.put(run_.secret.empty() ? 0 : kSigned, 1);
  w.put(uint32_t(run_.rank), 4);
  w.put(uint32_t(getpid()), 4);
  w.put(host.size(), 4);
  w.put_bytes(host.data(), host.size());
  w.put(payload.size(), 8);
  w.put_bytes(payload.data(), payload.size());
  std::string out = w.take();
  if (!run_.secret.empty()) out += hmac_sha256(run_.secret, key + '\0' + out);
  return out;
}

std::string JobStore::unframe(const std::string& key, const std::string& value) const {
  const Framed f = parse_frame(key, value, kv_->describe());
  if (f.is_signed) {
    DDPH_CHECK(!run_.secret.empty(), DDPH_INVALID_ARGUMENT,
               "job '" << run_.job << "': " << f.who() << " signed key '" << key
                       << "' with a secret, and this rank (" << run_.rank
                       << ") has none: give every rank the same comm.secret_file (or "
                          "DDPH_JOB_SECRET_FILE)");
    const std::string expected =
        hmac_sha256(run_.secret, key + '\0' + value.substr(0, f.signed_bytes));
    DDPH_CHECK(equal_in_constant_time(expected, f.mac), DDPH_INVALID_ARGUMENT,
               "job '" << run_.job << "': refused key '" << key << "', claimed by " << f.who()
                       << ": it is not signed with this job's secret (a process without the "
                          "job's secret, or with another one, tried to join)");
  } else {
    DDPH_CHECK(run_.secret.empty(), DDPH_INVALID_ARGUMENT,
               "job '" << run_.job << "': refused key '" << key << "', written by " << f.who()
                       << ": it is not signed, and this job has a secret: a process without "
                          "the secret tried to join");
  }
  return f.payload;
}

void JobStore::begin_locked() {
  if (begun_) return;
  const rendezvous::Deadline deadline = rendezvous::deadline_in(run_.timeout);
  const std::string marker = marker_key();
  const std::string prefix = "ddph/" + run_.job + "/";
  std::string nonce;
  if (run_.rank == 0) {
    nonce = random_hex(kNonceBytes);
    LeWriter w;
    w.put_bytes(nonce.data(), nonce.size());
    w.put(uint32_t(run_.world), 4);
    w.put(unix_ms_now(), 8);
    if (!kv_->add(marker, frame(marker, w.take()), deadline)) {
      std::string existing, holder = "rank 0 of another process";
      if (kv_->try_get(marker, &existing, deadline)) {
        const Framed f = parse_frame(marker, existing, kv_->describe());
        holder = f.who();
        if (f.payload.size() >= kNonceChars + 12) {
          LeReader r(f.payload.data() + kNonceChars, f.payload.size() - kNonceChars, "marker");
          r.get(4, "world");
          holder += ", started at " + utc_text(r.get(8, "start"));
        }
      }
      DDPH_FAIL(DDPH_INVALID_ARGUMENT,
                "job '" << run_.job << "' (the id from " << run_.job_source
                        << "): a job with this id already ran here or is running: "
                        << kv_->describe() << " holds its run marker, written by " << holder
                        << ". If that job has ended, it did not end well and left its keys: "
                           "remove them ("
                        << kv_->how_to_remove(prefix)
                        << ") and start again. To run jobs side by side, give each its own id "
                           "(comm.job in the YAML, DDPH_JOB_ID, or ddph train --job)");
    }
    own_marker_ = true;
  } else {
    std::string value;
    try {
      value = kv_->get(marker, deadline);
    } catch (const rendezvous::KeysMissing&) {
      // The store answered and the marker was not there. A store that did
      // not answer throws a plain Error naming itself, which goes up as is.
      DDPH_FAIL(DDPH_TIMEOUT, "job '" << run_.job << "' (the id from " << run_.job_source
                                      << "): rank 0 did not start the run in " << kv_->describe()
                                      << " within " << run_.timeout.count()
                                      << " ms: is rank 0 running, with the same job id and "
                                         "rendezvous?");
    }
    const Framed f = parse_frame(marker, value, kv_->describe());
    const std::string payload = unframe(marker, value);
    LeReader r(payload.data(), payload.size(), "the run marker");
    nonce.assign(reinterpret_cast<const char*>(r.take(kNonceChars, "nonce")), kNonceChars);
    const uint32_t world = uint32_t(r.get(4, "world size"));
    const uint64_t started = r.get(8, "start time");
    DDPH_CHECK(int64_t(world) == run_.world, DDPH_INVALID_ARGUMENT,
               "world size mismatch in job '"
                   << run_.job << "': this rank (" << run_.rank << ") was started with world_size "
                   << run_.world << ", but " << f.who() << " started the job at "
                   << utc_text(started) << " with world_size " << world
                   << ". Start every rank with the same world size (if that rank 0 belongs to an "
                      "earlier run that crashed, remove its keys: "
                   << kv_->how_to_remove(prefix) << ")");
  }
  namespace_ = prefix + nonce + "/";
  // One key per rank number, taken only if free: two processes started as
  // the same rank are told so instead of one silently replacing the other.
  const std::string claim = namespace_ + "rank/" + std::to_string(run_.rank);
  if (!kv_->add(claim, frame(claim, ""), deadline)) {
    std::string existing, holder = "another process";
    if (kv_->try_get(claim, &existing, deadline))
      holder = parse_frame(claim, existing, kv_->describe()).who();
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, "rank " << run_.rank << " of job '" << run_.job
                                             << "' is taken: " << holder
                                             << " already joined as that rank; every rank of a "
                                                "job needs its own number");
  }
  wrote_.push_back(claim);
  begun_ = true;
}

std::string JobStore::full_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_locked();
  return namespace_ + key;
}

void JobStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  begin_locked();
  const std::string full = namespace_ + key;
  const rendezvous::Deadline deadline = rendezvous::deadline_in(run_.timeout);
  if (!kv_->add(full, frame(full, value), deadline)) {
    std::string existing, holder = "another process";
    if (kv_->try_get(full, &existing, deadline))
      holder = parse_frame(full, existing, kv_->describe()).who();
    DDPH_FAIL(DDPH_COMM_FAILURE, "job '" << run_.job << "': key '" << key
                                         << "' was already written by " << holder << "; this rank ("
                                         << run_.rank << ") cannot write it again");
  }
  wrote_.push_back(full);
}

std::string JobStore::get(const std::string& key, int64_t timeout_ms) {
  const std::string full = full_key(key);  // waits below without the lock
  const std::string value =
      kv_->get(full, rendezvous::deadline_in(std::chrono::milliseconds(timeout_ms)));
  return unframe(full, value);
}

void JobStore::release() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  // A store that stopped answering must not hold up the close for long.
  const auto budget = std::min<std::chrono::milliseconds>(run_.timeout, std::chrono::seconds(5));
  const rendezvous::Deadline deadline = rendezvous::deadline_in(budget);
  std::vector<std::string> keys;
  keys.swap(wrote_);
  if (own_marker_) keys.push_back(marker_key());
  own_marker_ = false;
  for (const std::string& key : keys) {
    try {
      kv_->erase(key, deadline);
    } catch (const std::exception& e) {
      log(DDPH_LOG_WARN, "loader",
          "job '" + run_.job + "': could not remove key '" + key + "': " + e.what());
    }
  }
}

}  // namespace loader
}  // namespace ddph
