// The wire protocol of the tcp:// store, which rank 0 serves
// (tcp_server.h) and every other rank speaks (tcp_store.h). Every message
// is a frame: u32 length, then that many bytes, little-endian throughout.
//
// Handshake, before any request:
//   client -> Hello     magic, version, the client's rank, pid, host and
//                       job, whether it holds a secret, a random nonce
//   server -> Greeting  verdict and, when refused, why; the server's job,
//                       whether it holds a secret, its nonce, the id of
//                       this run of the server and, when both hold a
//                       secret, the server's proof
//   when both hold a secret:
//   client -> Proof     whether it accepts the server's proof; its own
//   server -> Verdict   verdict and, when refused, why
// A proof is the HMAC-SHA256, under the job's secret, of a label, both
// nonces and the job: each side shows it holds the secret without sending
// it, and a proof cannot be replayed on another connection.
//
// Requests, once accepted: an op and its fields; the reply is a status
// (0: ok, else the server's words) and the op's answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddph {
namespace rendezvous {
namespace tcp {

constexpr uint32_t kVersion = 1;
constexpr size_t kNonceBytes = 16;
constexpr size_t kProofBytes = 32;
// A frame's body; larger lengths are garbage or another protocol.
constexpr uint32_t kMaxFrame = 64u << 20;

struct Hello {
  uint32_t version = kVersion;
  uint32_t rank = 0, pid = 0;
  std::string host, job;
  bool has_secret = false;
  std::string nonce;  // kNonceBytes
  // "rank 1 (pid 42 on host a)", for messages.
  std::string who() const;
};

enum Verdict : uint8_t { kAccepted = 0, kRefused = 1 };

struct Greeting {
  Verdict verdict = kAccepted;
  std::string why;  // kRefused: the server's words
  std::string job;
  bool has_secret = false;
  std::string nonce, instance;  // kNonceBytes each
  std::string proof;            // kProofBytes when both hold a secret, else empty
};

struct Proof {
  bool accepts = false;  // the server's proof was right
  std::string proof;     // kProofBytes
};

struct Answer {
  Verdict verdict = kAccepted;
  std::string why;
};

enum Op : uint8_t { kSet = 1, kAdd = 2, kGet = 3, kErase = 4 };

struct Request {
  Op op = kGet;
  std::vector<std::string> keys;  // kGet: any number; else one
  std::string value;              // kSet, kAdd
};

// The server's reply: status 0 and, for kAdd, whether it added; for kGet,
// found and value per key. Non-zero status: `error` says why.
struct Reply {
  uint8_t status = 0;
  std::string error;
  bool added = false;
  std::vector<bool> found;
  std::vector<std::string> values;
};

// Encoders and decoders; a decoder throws DDPH_COMM_FAILURE saying which
// field of which message is malformed (the peer is not a ddph store of
// this version, or the bytes were damaged).
std::string encode(const Hello& m);
std::string encode(const Greeting& m);
std::string encode(const Proof& m);
std::string encode(const Answer& m);
std::string encode(const Request& m);
std::string encode(const Reply& m);
Hello decode_hello(const std::string& body);
Greeting decode_greeting(const std::string& body);
Proof decode_proof(const std::string& body);
Answer decode_answer(const std::string& body);
Request decode_request(const std::string& body);
Reply decode_reply(const std::string& body, Op op, size_t keys);

// What each side signs: a label (server or client) and the nonces, the
// signer's peer's first, then the job.
std::string server_proof_input(const std::string& client_nonce, const std::string& server_nonce,
                               const std::string& job);
std::string client_proof_input(const std::string& server_nonce, const std::string& client_nonce,
                               const std::string& job);

// Compares in time independent of where a and b differ.
bool same_proof(const std::string& a, const std::string& b);

// n bytes from the kernel's random source (getrandom).
std::string random_bytes(size_t n);

}  // namespace tcp
}  // namespace rendezvous
}  // namespace ddph
