#include "core/comm/rendezvous/tcp_protocol.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace rendezvous {
namespace tcp {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'T', 'C', 'P', '1'};

void put_string(LeWriter& w, const std::string& s) {
  w.put(s.size(), 4);
  w.put_bytes(s.data(), s.size());
}

std::string get_string(LeReader& r, const char* field) {
  const uint64_t n = r.get(4, field);
  DDPH_CHECK(n <= r.left(), DDPH_INVALID_ARGUMENT,
             field << " claims " << n << " bytes, " << r.left() << " are left");
  return std::string(reinterpret_cast<const char*>(r.take(size_t(n), field)), size_t(n));
}

std::string get_fixed(LeReader& r, size_t n, const char* field) {
  return std::string(reinterpret_cast<const char*>(r.take(n, field)), n);
}

// Runs a decoder; a malformed body is the peer's fault: DDPH_COMM_FAILURE.
template <class Body>
auto decoding(const char* message, const std::string& body, Body&& read) {
  try {
    LeReader r(body.data(), body.size(), message);
    auto out = read(r);
    DDPH_CHECK(r.left() == 0, DDPH_INVALID_ARGUMENT, r.left() << " bytes past its end");
    return out;
  } catch (const Error& e) {
    DDPH_FAIL(DDPH_COMM_FAILURE, "a malformed tcp store " << message << " (" << e.what()
                                                          << "): the peer is not a ddph tcp "
                                                             "store of this version");
  }
}

// Every message starts with the store's magic: anything else on the port is
// not a ddph tcp store.
void read_magic(LeReader& r) {
  DDPH_CHECK(get_fixed(r, sizeof kMagic, "magic") == std::string(kMagic, sizeof kMagic),
             DDPH_INVALID_ARGUMENT, "wrong magic");
}

}  // namespace

std::string Hello::who() const {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + " on host " + host + ")";
}

std::string encode(const Hello& m) {
  LeWriter w;
  w.put_bytes(kMagic, sizeof kMagic);
  w.put(m.version, 4);
  w.put(m.rank, 4);
  w.put(m.pid, 4);
  put_string(w, m.host);
  put_string(w, m.job);
  w.put(m.has_secret ? 1 : 0, 1);
  w.put_bytes(m.nonce.data(), m.nonce.size());
  return w.take();
}

Hello decode_hello(const std::string& body) {
  return decoding("hello", body, [](LeReader& r) {
    read_magic(r);
    Hello m;
    m.version = uint32_t(r.get(4, "version"));
    DDPH_CHECK(m.version == kVersion, DDPH_INVALID_ARGUMENT,
               "protocol version " << m.version << ", this build speaks " << kVersion);
    m.rank = uint32_t(r.get(4, "rank"));
    m.pid = uint32_t(r.get(4, "pid"));
    m.host = get_string(r, "host");
    m.job = get_string(r, "job");
    m.has_secret = r.get(1, "has_secret") != 0;
    m.nonce = get_fixed(r, kNonceBytes, "nonce");
    return m;
  });
}

std::string encode(const Greeting& m) {
  LeWriter w;
  w.put_bytes(kMagic, sizeof kMagic);
  w.put(m.verdict, 1);
  put_string(w, m.why);
  put_string(w, m.job);
  w.put(m.has_secret ? 1 : 0, 1);
  w.put_bytes(m.nonce.data(), m.nonce.size());
  w.put_bytes(m.instance.data(), m.instance.size());
  put_string(w, m.proof);
  return w.take();
}

Greeting decode_greeting(const std::string& body) {
  return decoding("greeting", body, [](LeReader& r) {
    read_magic(r);
    Greeting m;
    m.verdict = Verdict(r.get(1, "verdict"));
    m.why = get_string(r, "why");
    m.job = get_string(r, "job");
    m.has_secret = r.get(1, "has_secret") != 0;
    m.nonce = get_fixed(r, kNonceBytes, "nonce");
    m.instance = get_fixed(r, kNonceBytes, "instance");
    m.proof = get_string(r, "proof");
    return m;
  });
}

std::string encode(const Proof& m) {
  LeWriter w;
  w.put(m.accepts ? 1 : 0, 1);
  put_string(w, m.proof);
  return w.take();
}

Proof decode_proof(const std::string& body) {
  return decoding("proof", body, [](LeReader& r) {
    Proof m;
    m.accepts = r.get(1, "accepts") != 0;
    m.proof = get_string(r, "proof");
    return m;
  });
}

std::string encode(const Answer& m) {
  LeWriter w;
  w.put(m.verdict, 1);
  put_string(w, m.why);
  return w.take();
}

Answer decode_answer(const std::string& body) {
  return decoding("verdict", body, [](LeReader& r) {
    Answer m;
    m.verdict = Verdict(r.get(1, "verdict"));
    m.why = get_string(r, "why");
    return m;
  });
}

std::string encode(const Request& m) {
  LeWriter w;
  w.put(m.op, 1);
  w.put(m.keys.size(), 4);
  for (const std::string& key : m.keys) put_string(w, key);
  if (m.op == kSet || m.op == kAdd) put_string(w, m.value);
  return w.take();
}

Request decode_request(const std::string& body) {
  return decoding("request", body, [](LeReader& r) {
    Request m;
    const uint64_t op = r.get(1, "op");
    DDPH_CHECK(op >= kSet && op <= kErase, DDPH_INVALID_ARGUMENT, "unknown op " << op);
    m.op = Op(op);
    const uint64_t n = r.get(4, "key count");
    DDPH_CHECK(n <= r.left() / 4, DDPH_INVALID_ARGUMENT, n << " keys cannot fit");
    DDPH_CHECK(m.op == kGet || n == 1, DDPH_INVALID_ARGUMENT,
               "op " << op << " with " << n << " keys");
    for (uint64_t i = 0; i < n; ++i) m.keys.push_back(get_string(r, "key"));
    if (m.op == kSet || m.op == kAdd) m.value = get_string(r, "value");
    return m;
  });
}

std::string encode(const Reply& m) {
  LeWriter w;
  w.put(m.status, 1);
  if (m.status != 0) {
    put_string(w, m.error);
    return w.take();
  }
  w.put(m.added ? 1 : 0, 1);
  w.put(m.found.size(), 4);
  for (size_t i = 0; i < m.found.size(); ++i) {
    w.put(m.found[i] ? 1 : 0, 1);
    if (m.found[i]) put_string(w, m.values[i]);
  }
  return w.take();
}

Reply decode_reply(const std::string& body, Op op, size_t keys) {
  return decoding("reply", body, [&](LeReader& r) {
    Reply m;
    m.status = uint8_t(r.get(1, "status"));
    if (m.status != 0) {
      m.error = get_string(r, "error");
      return m;
    }
    m.added = r.get(1, "added") != 0;
    const uint64_t n = r.get(4, "value count");
    const size_t want = op == kGet ? keys : 0;
    DDPH_CHECK(n == want, DDPH_INVALID_ARGUMENT, n << " values for " << want << " keys");
    m.found.assign(want, false);
    m.values.assign(want, std::string());
    for (size_t i = 0; i < want; ++i) {
      m.found[i] = r.get(1, "found") != 0;
      if (m.found[i]) m.values[i] = get_string(r, "value");
    }
    return m;
  });
}

std::string server_proof_input(const std::string& client_nonce, const std::string& server_nonce,
                               const std::string& job) {
  return std::string("ddph tcp store server") + '\0' + client_nonce + server_nonce + job;
}

std::string client_proof_input(const std::string& server_nonce, const std::string& client_nonce,
                               const std::string& job) {
  return std::string("ddph tcp store client") + '\0' + server_nonce + client_nonce + job;
}

bool same_proof(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    const ssize_t got = getrandom(&out[done], n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    DDPH_CHECK(got > 0, DDPH_INTERNAL,
               "cannot draw random bytes (getrandom: " << strerror(errno) << ")");
    done += size_t(got);
  }
  return out;
}

}  // namespace tcp
}  // namespace rendezvous
}  // namespace ddph
