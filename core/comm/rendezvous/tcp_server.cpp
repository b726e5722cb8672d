#include "core/comm/rendezvous/tcp_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/comm/rendezvous/tcp_fork.h"
#include "core/comm/rendezvous/tcp_protocol.h"

namespace ddph {
namespace rendezvous {
struct TcpServer::Conn {
  ~Conn() { tcp::release_server_socket(fd); }
  tcp::Fd fd;
  std::string peer;
  std::string in, out;
  // kClosing: refused; closed once what it was told is sent.
  enum State { kHello, kProof, kReady, kClosing } state = kHello;
  tcp::Hello hello;
  std::string nonce;
  bool dead = false;
};

namespace {

constexpr size_t kKeptRefusals = 4;

void put_frame(std::string* out, const std::string& body) {
  const uint32_t n = uint32_t(body.size());
  for (int i = 0; i < 4; ++i) out->push_back(char(uint8_t(n >> (8 * i))));
  *out += body;
}

}  // namespace

TcpServer::TcpServer(int port, std::string url, std::string name, const StoreAccess& access,
                     std::shared_ptr<KvStore> keys)
    : url_(std::move(url)),
      name_(std::move(name)),
      access_(access),
      keys_(std::move(keys)),
      instance_(tcp::random_bytes(tcp::kNonceBytes)) {
  try {
    listener_ = tcp::server_socket([&] { return tcp::listen_on(port, url_); });
    wake_ = tcp::server_socket([] { return tcp::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)); });
    DDPH_CHECK(wake_.valid(), DDPH_COMM_FAILURE, name_ << ": eventfd: " << strerror(errno));
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    tcp::release_server_socket(listener_);
    tcp::release_server_socket(wake_);
    throw;
  }
}

TcpServer::~TcpServer() {
  stop_.store(true);
  const uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof one) < 0) {
    // The loop also wakes within its poll period below.
  }
  thread_.join();
  tcp::release_server_socket(listener_);
  tcp::release_server_socket(wake_);
}

std::string TcpServer::refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (refused_ == 0) return "";
  std::string text = name_ + " refused " + std::to_string(refused_) +
                     (refused_ == 1 ? " connection" : " connections");
  if (refused_ > refusals_.size()) text += " (the last " + std::to_string(refusals_.size()) + ")";
  text += ": ";
  for (size_t i = 0; i < refusals_.size(); ++i) text += (i ? "; " : "") + refusals_[i];
  return text;
}

void TcpServer::note_refusal(const std::string& text) {
  log(DDPH_LOG_WARN, "rendezvous", name_ + ": " + text);
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_;
  refusals_.push_back(text);
  if (refusals_.size() > kKeptRefusals) refusals_.erase(refusals_.begin());
}

void TcpServer::run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listener_.get(), POLLIN, 0});
    for (const auto& c : conns_)
      fds.push_back({c->fd.get(), short(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    // The period only bounds a missed wake-up; the eventfd ends the wait.
    const int n = poll(fds.data(), fds.size(), 1000);
    if (n < 0 && errno != EINTR) break;
    if (stop_.load()) break;
    if (n <= 0) continue;
    if (fds[1].revents & POLLIN) accept_all();
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      Conn& c = *conns_[i];
      const short ev = fds[i + 2].revents;
      if (ev & (POLLIN | POLLHUP | POLLERR)) c.dead = !read_from(c) || c.dead;
      if (!c.dead && !c.out.empty()) c.dead = !write_to(c);
      if (c.state == Conn::kClosing && c.out.empty()) c.dead = true;
    }
    for (size_t i = conns_.size(); i-- > 0;)
      if (conns_[i]->dead) conns_.erase(conns_.begin() + long(i));
  }
  conns_.clear();  // every client's connection closes: its next request fails
}

void TcpServer::accept_all() {
  for (;;) {
    auto c = std::make_unique<Conn>();
    c->fd = tcp::server_socket([&] {
      return tcp::Fd(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    });
    if (!c->fd.valid()) return;  // EAGAIN: none left; anything else: tried again next round
    c->peer = tcp::peer_of(c->fd.get());
    conns_.push_back(std::move(c));
  }
}

bool TcpServer::read_from(Conn& c) {
  char buf[65536];
  // A client may send its last frame and close at once (a client that
  // refuses this store says why, then goes): its frames are read first.
  bool open = true;
  for (;;) {
    const ssize_t k = recv(c.fd.get(), buf, sizeof buf, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (k <= 0) {
      open = false;
      break;
    }
    if (c.state != Conn::kClosing) c.in.append(buf, size_t(k));
  }
  while (c.state != Conn::kClosing && c.in.size() >= 4) {
    const auto* p = reinterpret_cast<const unsigned char*>(c.in.data());
    const uint32_t n =
        uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    if (n > tcp::kMaxFrame) {
      note_refusal("closed the connection from " + c.peer + ": it sent a frame of " +
                   std::to_string(n) + " bytes (not a ddph rank)");
      return false;
    }
    if (c.in.size() < 4 + size_t(n)) break;
    const std::string body = c.in.substr(4, n);
    c.in.erase(0, 4 + size_t(n));
    on_frame(c, body);
  }
  return open;
}

bool TcpServer::write_to(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t k = send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (k > 0) {
      c.out.erase(0, size_t(k));
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

void TcpServer::on_frame(Conn& c, const std::string& body) {
  try {
    if (c.state == Conn::kHello) return on_hello(c, body);
    if (c.state == Conn::kProof) return on_proof(c, body);
    return on_request(c, body);
  } catch (const Error& e) {
    // Malformed: not a ddph rank of this version.
    note_refusal("closed the connection from " + c.peer + ": " + e.what());
    c.state = Conn::kClosing;
  }
}

void TcpServer::on_hello(Conn& c, const std::string& body) {
  tcp::Greeting g;
  g.job = access_.job;
  g.has_secret = bool(access_.sign);
  g.nonce = c.nonce = tcp::random_bytes(tcp::kNonceBytes);
  g.instance = instance_;
  tcp::Hello h;
  try {
    h = tcp::decode_hello(body);
  } catch (const Error& e) {
    g.verdict = tcp::kRefused;
    g.why = e.what();
    put_frame(&c.out, tcp::encode(g));
    note_refusal("refused the connection from " + c.peer + ": " + e.what());
    c.state = Conn::kClosing;
    return;
  }
  c.hello = h;
  const std::string who = h.who() + " from " + c.peer;
  std::string why;
  if (h.job != access_.job)
    why = "refused " + who + " of job '" + h.job + "': this store serves job '" + access_.job + "'";
  else if (g.has_secret && !h.has_secret)
    why = "refused " + who + " of job '" + h.job + "': it holds no secret, and this job has one";
  else if (!g.has_secret && h.has_secret)
    why = "refused " + who + " of job '" + h.job + "': it holds a secret, and this job has none";
  if (!why.empty()) {
    g.verdict = tcp::kRefused;
    g.why = why;
    put_frame(&c.out, tcp::encode(g));
    note_refusal(why);
    c.state = Conn::kClosing;
    return;
  }
  if (g.has_secret) {
    g.proof = access_.sign(tcp::server_proof_input(h.nonce, c.nonce, access_.job));
    c.state = Conn::kProof;
  } else {
    c.state = Conn::kReady;
  }
  put_frame(&c.out, tcp::encode(g));
}

void TcpServer::on_proof(Conn& c, const std::string& body) {
  const tcp::Proof p = tcp::decode_proof(body);
  const std::string who = c.hello.who() + " from " + c.peer;
  if (!p.accepts) {
    note_refusal(who + " of job '" + access_.job +
                 "' refused this store: it holds another secret than this job's");
    c.state = Conn::kClosing;
    return;
  }
  const std::string want =
      access_.sign(tcp::client_proof_input(c.nonce, c.hello.nonce, access_.job));
  tcp::Answer a;
  if (!tcp::same_proof(want, p.proof)) {
    a.verdict = tcp::kRefused;
    a.why = "refused " + who + " of job '" + access_.job +
            "': its proof does not match this job's secret (it holds another secret)";
    note_refusal(a.why);
    c.state = Conn::kClosing;
  } else {
    c.state = Conn::kReady;
  }
  put_frame(&c.out, tcp::encode(a));
}

void TcpServer::on_request(Conn& c, const std::string& body) {
  const tcp::Request r = tcp::decode_request(body);
  tcp::Reply reply;
  // The keys are in memory: the deadline is never reached.
  const Deadline deadline = deadline_in(std::chrono::seconds(10));
  try {
    switch (r.op) {
      case tcp::kSet:
        keys_->set(r.keys[0], r.value, deadline);
        break;
      case tcp::kAdd:
        reply.added = keys_->add(r.keys[0], r.value, deadline);
        break;
      case tcp::kGet:
        keys_->try_get_many(r.keys, &reply.values, &reply.found, deadline);
        break;
      case tcp::kErase:
        keys_->erase(r.keys[0], deadline);
        break;
    }
  } catch (const std::exception& e) {
    reply = tcp::Reply();
    reply.status = 1;
    reply.error = e.what();
  }
  put_frame(&c.out, tcp::encode(reply));
}

}  // namespace rendezvous
}  // namespace ddph
