#include "core/comm/rendezvous/tcp_store.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "core/base/error.h"

namespace ddph {
namespace rendezvous {
namespace {

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

constexpr std::chrono::milliseconds kLastLook(250);

const char kSameSecret[] = "give every rank the same comm.secret_file (or DDPH_JOB_SECRET_FILE)";

}  // namespace

TcpStore::TcpStore(std::string host, int port, int rank, std::string url, const StoreAccess& access)
    : host_(std::move(host)),
      url_(std::move(url)),
      name_("rank 0's tcp store at " + host_port(host_, port)),
      port_(port),
      rank_(rank),
      access_(access) {
  if (rank_ != 0) return;
  keys_ = memory_store();
  server_ = std::make_unique<TcpServer>(port_, url_, name_, access_, keys_);
}

TcpStore::~TcpStore() = default;

std::string TcpStore::how_to_remove(const std::string&) const {
  return "nothing to remove: the keys live in rank 0's process and go with it";
}

std::string TcpStore::last_miss() const {
  return server_ ? server_->refusals() : "";
}

void TcpStore::set(const std::string& key, const std::string& value, Deadline deadline) {
  if (server_) return keys_->set(key, value, deadline);
  tcp::Request r;
  r.op = tcp::kSet;
  r.keys = {key};
  r.value = value;
  call(r, deadline, "set '" + key + "'");
}

bool TcpStore::add(const std::string& key, const std::string& value, Deadline deadline) {
  if (server_) return keys_->add(key, value, deadline);
  tcp::Request r;
  r.op = tcp::kAdd;
  r.keys = {key};
  r.value = value;
  return call(r, deadline, "set '" + key + "' if absent").added;
}

bool TcpStore::try_get(const std::string& key, std::string* value, Deadline deadline) {
  std::vector<std::string> values;
  std::vector<bool> found;
  try_get_many({key}, &values, &found, deadline);
  if (found[0]) *value = std::move(values[0]);
  return found[0];
}

void TcpStore::try_get_many(const std::vector<std::string>& keys, std::vector<std::string>* values,
                            std::vector<bool>* found, Deadline deadline) {
  if (server_) return keys_->try_get_many(keys, values, found, deadline);
  tcp::Request r;
  r.op = tcp::kGet;
  r.keys = keys;
  tcp::Reply reply = call(
      r, deadline,
      keys.size() == 1 ? "get '" + keys[0] + "'"
                       : "get " + std::to_string(keys.size()) + " keys from '" + keys[0] + "'");
  *values = std::move(reply.values);
  *found = std::move(reply.found);
}

void TcpStore::erase(const std::string& key, Deadline deadline) {
  if (server_) return keys_->erase(key, deadline);
  tcp::Request r;
  r.op = tcp::kErase;
  r.keys = {key};
  call(r, deadline, "delete '" + key + "'");
}

void TcpStore::lost(const std::string& what, const std::string& why) {
  DDPH_FAIL(DDPH_COMM_FAILURE,
            name_ << " (" << url_ << "), on rank " << rank_ << ": " << what << ": " << why
                  << ": rank 0 ended or failed (its process is gone, or it closed its session), "
                     "and the keys this rank wrote there went with it");
}

tcp::Reply TcpStore::call(const tcp::Request& r, Deadline deadline, const std::string& what) {
  const std::string body = tcp::encode(r);
  DDPH_CHECK(body.size() <= tcp::kMaxFrame, DDPH_INVALID_ARGUMENT,
             name_ << ": " << what << ": " << body.size() << " bytes; the tcp store takes up to "
                   << tcp::kMaxFrame << " bytes a request");
  std::lock_guard<std::mutex> lock(mu_);
  for (;;) {
    if (!fd_.valid()) connect(deadline);
    // From here the server may hold what this request writes.
    if (r.op != tcp::kGet) wrote_ = true;
    // A wait's last look comes at its deadline (KvStore::poll): the request
    // gets the moment a server that is up needs to answer, so that a
    // missing key is reported as missing, not as a silent rank 0.
    const Deadline io_deadline = std::max(deadline, Clock::now() + kLastLook);
    std::string why, answer;
    tcp::Io io = tcp::send_frame(fd_.get(), body, io_deadline, &why);
    if (io == tcp::Io::kOk) io = tcp::recv_frame(fd_.get(), &answer, io_deadline, &why);
    if (io == tcp::Io::kOk) {
      tcp::Reply reply;
      try {
        reply = tcp::decode_reply(answer, r.op, r.keys.size());
      } catch (...) {
        fd_.reset();
        throw;
      }
      DDPH_CHECK(
          reply.status == 0, DDPH_COMM_FAILURE,
          name_ << ", on rank " << rank_ << ": " << what << ": rank 0 answered: " << reply.error);
      return reply;
    }
    // A reply that did not come in time would answer the next request:
    // the connection is out of step, and goes.
    fd_.reset();
    DDPH_CHECK(io != tcp::Io::kTimeout, DDPH_TIMEOUT,
               name_ << " (" << url_ << "), on rank " << rank_ << ": " << what
                     << ": rank 0 did not answer in time (is its process stopped or "
                        "overloaded?)");
    if (wrote_) lost(what, why);
    // Nothing of this rank's was there: a later run of rank 0's server
    // (the job's next session) serves as well, if it comes in time.
    DDPH_CHECK(Clock::now() < deadline, DDPH_TIMEOUT,
               name_ << " (" << url_ << "), on rank " << rank_ << ": " << what << ": " << why
                     << ", and rank 0 did not serve again in time");
  }
}

void TcpStore::connect(Deadline deadline) {
  const auto start = Clock::now();
  std::chrono::milliseconds pause(10);
  std::string why;
  for (;;) {
    bool retry = true;
    tcp::Fd fd = tcp::connect_once(host_, port_, deadline, &why, &retry);
    DDPH_CHECK(retry, DDPH_INVALID_ARGUMENT,
               url_ << ", on rank " << rank_ << ": " << why << " (rank 0's address)");
    if (fd.valid()) {
      fd_ = std::move(fd);
      try {
        handshake(deadline);
        return;
      } catch (const tcp::Io&) {
        fd_.reset();
        why = "the connection closed during the handshake";
      } catch (...) {
        fd_.reset();
        throw;
      }
    }
    // The server that held this rank's keys is gone: no use waiting.
    if (wrote_) lost("reconnecting", why);
    const auto now = Clock::now();
    DDPH_CHECK(now < deadline, DDPH_TIMEOUT,
               "rank " << rank_ << " cannot reach " << name_ << " (" << url_ << "): no answer for "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count()
                       << " ms (" << why
                       << "). Is rank 0 running, and do all ranks have the same MASTER_ADDR and "
                          "MASTER_PORT (or tcp:// address)?");
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

// Throws tcp::Io::kClosed when the connection closes before the verdict
// (a server that is shutting down): connect tries again.
void TcpStore::handshake(Deadline deadline) {
  tcp::Hello hello;
  hello.rank = uint32_t(rank_);
  hello.pid = uint32_t(getpid());
  hello.host = this_host();
  hello.job = access_.job;
  hello.has_secret = bool(access_.sign);
  hello.nonce = tcp::random_bytes(tcp::kNonceBytes);
  auto exchange = [&](const std::string* send, std::string* receive) {
    std::string why;
    tcp::Io io = send ? tcp::send_frame(fd_.get(), *send, deadline, &why) : tcp::Io::kOk;
    if (io == tcp::Io::kOk && receive) io = tcp::recv_frame(fd_.get(), receive, deadline, &why);
    DDPH_CHECK(io != tcp::Io::kTimeout, DDPH_TIMEOUT,
               name_ << " (" << url_ << "), on rank " << rank_
                     << ": the server took the connection but did not finish the handshake in "
                        "time (is another program listening on that port?)");
    if (io == tcp::Io::kClosed) throw io;
  };
  const std::string job = "job '" + access_.job + "' (rank " + std::to_string(rank_) + "): ";
  std::string body = tcp::encode(hello);
  exchange(&body, &body);
  const tcp::Greeting g = tcp::decode_greeting(body);
  if (g.verdict != tcp::kAccepted) {
    DDPH_CHECK(g.job == access_.job, DDPH_INVALID_ARGUMENT,
               job << name_ << " (" << url_ << ") serves job '" << g.job
                   << "', not this one: two jobs were given the same address and port, or "
                      "the ranks of one job different job ids. Give each job its own "
                      "MASTER_PORT (or tcp:// port), and every rank of a job the same id "
                      "(comm.job, DDPH_JOB_ID or ddph train --job)");
    DDPH_CHECK(!g.has_secret || hello.has_secret, DDPH_INVALID_ARGUMENT,
               job << name_ << " admits only ranks that hold the job's secret, and this rank ("
                   << rank_ << ") has none: " << kSameSecret);
    DDPH_CHECK(g.has_secret || !hello.has_secret, DDPH_INVALID_ARGUMENT,
               job << "this rank (" << rank_ << ") holds a secret, and rank 0 (" << name_
                   << ") has none: " << kSameSecret << ", or none");
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, job << name_ << " refused this rank: " << g.why);
  }
  if (g.has_secret) {
    tcp::Proof proof;
    proof.accepts = tcp::same_proof(
        g.proof, access_.sign(tcp::server_proof_input(hello.nonce, g.nonce, access_.job)));
    proof.proof = access_.sign(tcp::client_proof_input(g.nonce, hello.nonce, access_.job));
    body = tcp::encode(proof);
    if (!proof.accepts) {
      // Tell the server why (it notes the refusal), then refuse it.
      try {
        exchange(&body, nullptr);
      } catch (const tcp::Io&) {
      }
      DDPH_FAIL(DDPH_INVALID_ARGUMENT,
                job << name_ << " (" << url_
                    << ") did not prove it holds this rank's secret: rank 0 and this rank hold "
                       "different secrets (or another program serves that port): "
                    << kSameSecret);
    }
    exchange(&body, &body);
    const tcp::Answer a = tcp::decode_answer(body);
    DDPH_CHECK(a.verdict == tcp::kAccepted, DDPH_INVALID_ARGUMENT,
               job << name_ << " refused this rank: " << a.why);
  }
  DDPH_CHECK(!wrote_ || instance_.empty() || instance_ == g.instance, DDPH_COMM_FAILURE,
             name_ << " (" << url_ << "), on rank " << rank_
                   << ": rank 0's server was restarted (rank 0 ended or failed and started "
                      "again), and the keys this rank wrote are gone");
  instance_ = g.instance;
}

}  // namespace rendezvous
}  // namespace ddph
