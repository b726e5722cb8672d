// One rank's gloo communicator: a full mesh of TCP pairs plus the state that
// makes failures sticky (a "broken" communicator fails fast).
#pragma once

#include <ddph/ddph.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/error.h"
#include "core/comm/args.h"
#include "core/comm/backend.h"
#include "core/comm/rendezvous/gloo/gloo_store.h"
#include "core/comm/rendezvous/kv_store.h"
#include "plugins/comm_gloo/errors.h"
#include "plugins/comm_gloo/mailboxes.h"
#include "plugins/comm_gloo/peer_identity.h"
#include "plugins/comm_gloo/posted_buffers.h"
#include "plugins/comm_gloo/ring_layout.h"
#include "plugins/comm_gloo/small_allreduce.h"
#include "plugins/comm_gloo/wire_bytes.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
}  // namespace gloo

namespace ddph {
namespace comm_gloo {

struct CommConfig : CommPlace {
  std::string prefix;    // store namespace of this session
  std::string hostname;  // address to listen on
  std::string iface;     // overrides hostname when non-empty
  // Where the address came from, for errors: "" for the options, else the
  // environment variable that set it.
  std::string address_source;
  // The rank in the first communicator (the one split from nothing) of each
  // rank here; empty there, meaning the identity.
  std::vector<int> world_ranks;
};

class Communicator : public CommBackend {
 public:
  // Collective: connects to every peer through store, which it shares with
  // the communicators split from it. They count their bytes into `wire`
  // too, so a session's wire bytes include its subgroups' traffic.
  Communicator(const CommConfig& config, std::shared_ptr<rendezvous::KvStore> store,
               std::shared_ptr<WireBytes> wire = std::make_shared<WireBytes>());
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override { return config_.rank; }
  int size() const override { return config_.world; }

  // Collectives of ddph_comm_t; [serialized] per communicator.
  // Host memory only: `stream` is ignored.
  // send copies buf and returns once gloo has the message: gloo only puts
  // it on the wire after the peer posts the matching recv, so a blocking
  // send would deadlock a ring where every rank sends first. Delivery is
  // awaited by the next collective or barrier (drain_sends), which reports
  // a failed send.
  // split is collective: a communicator of the ranks that pass the same
  // color, ordered by (key, rank), or NULL for a negative color (split.cpp).
  DDPH_COMM_BACKEND_COLLECTIVES;

  // [thread-safe]
  bool counts_bytes() const override { return true; }
  uint64_t bytes_sent() override { return wire_->total(); }
  bool counts_bytes_per_peer() const override { return true; }
  // Bytes sent to the process that is rank peer here, by this communicator
  // and those sharing its count; 0 for this rank or one out of range.
  uint64_t bytes_sent_to(int peer) override;

 private:
  static constexpr CommReach kReach{"gloo", CommMemory::kHost};

  // Runs a gloo call for collective `what`: fails fast when broken, turns
  // gloo's exceptions into ddph::Error, and breaks the communicator on a
  // communication failure or timeout. fn may take a PostedBuffers& for the
  // unbound buffers it posts.
  template <class Fn>
  void run(const char* what, Fn&& fn);
  void check_not_broken(const char* what);
  void break_with(const Error& e);
  uint32_t next_tag() { return next_tag_++; }
  // allreduce of any op, bit-identical to gloo's; DDPH_AVG with
  // divide-first numerics: small_allreduce up to small_allreduce_limit,
  // ring_allreduce above (small_allreduce.cpp).
  void allreduce_any(const char* what, const CommBuf& send, const CommBuf& recv,
                     ddph_reduce_op_t op);
  // allreduce as one ring (ring_allreduce.cpp).
  void ring_allreduce(const char* what, const CommBuf& send, const CommBuf& recv,
                      ddph_reduce_op_t op);
  // The ring over buf in place with `layout`: its reduce-scatter, after
  // which this rank's chunk holds the result, then, with `gather`, its
  // allgather (ring_allreduce.cpp).
  void ring(const char* what, const CommBuf& buf, ddph_reduce_op_t op, const RingLayout& layout,
            bool gather);
  // allreduce as one exchange of whole buffers through the mailboxes,
  // combined in the ring's order (small_allreduce.cpp).
  void small_allreduce(const char* what, const CommBuf& send, const CommBuf& recv,
                       ddph_reduce_op_t op);
  // A byte range of a buffer.
  struct Span {
    size_t offset, bytes;
  };
  // Sends sends[p] of `in` to each peer p and receives recvs[p] of `out`
  // from it, all posted before any is awaited (exchange.cpp). Entries of
  // this rank and empty spans are skipped.
  void exchange(const char* what, const CommBuf& in, const std::vector<Span>& sends,
                const CommBuf& out, const std::vector<Span>& recvs);
  // Waits (within the timeout) until every buffered send is on the wire.
  void drain_sends(const char* what);
  // Waits for the oldest buffered send, inside run().
  void wait_oldest_send();
  // Inside run(): waits for ub's message from (recv) or to each of peers, in
  // whatever order they complete; each wait names the peers still
  // outstanding, should it time out. `failure` says what was aborted.
  void await_peers(::gloo::transport::UnboundBuffer& ub, bool recv, std::vector<int> peers,
                   const char* what, const char* failure);
  // Learns which tracked socket leads to which rank: every rank publishes
  // its sockets' ends through the store (endpoints.cpp). Collective.
  void attribute_sockets(const std::vector<SocketEnds>& ends);
  // text with every peer's address (as gloo prints it) replaced by its
  // rank, process and host.
  std::string name_peers(const std::string& text) const;
  int world_rank(int rank) const {
    return config_.world_ranks.empty() ? rank : config_.world_ranks[size_t(rank)];
  }

  CommConfig config_;
  std::shared_ptr<rendezvous::KvStore> store_;           // the URL's or the host's store
  std::unique_ptr<rendezvous::GlooStore> prefix_store_;  // store_ under config_.prefix
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::Context> context_;
  // The small allreduce's bound buffers (none at world 1), and its calls so
  // far (their parity picks the mailbox).
  std::unique_ptr<Mailboxes> mailboxes_;
  uint64_t small_calls_ = 0;
  std::shared_ptr<WireBytes> wire_;  // shared with the communicators split from this one
  std::vector<PeerIdentity> peers_;  // by rank here, from the store at connect time

  // The peers the wait in progress is for, and whether it waits for them
  // to send (else to take what this rank sent): a timeout's message names
  // them, since gloo's ("Timed out waiting 3000ms for recv") names nobody.
  // Set before each wait; run() clears it.
  std::vector<int> awaited_;
  bool awaiting_recv_ = true;
  void awaiting(bool recv, std::vector<int> peers) {
    awaiting_recv_ = recv;
    awaited_ = std::move(peers);
  }
  // "rank 1 (pid 1234 on host h, at 127.0.0.1:5555) sent nothing for 3000
  // ms: stalled (a stopped process) or overloaded, or making a different
  // call"; "" when no wait is marked.
  std::string who_did_not_answer() const;

  std::mutex broken_mutex_;
  std::string broken_;  // the first failure; empty while healthy

  uint32_t next_tag_ = 1;
  // reduce_scatter's copy of its send buffer, which the ring combines into;
  // grown as needed, kept for the next call (collectives.cpp).
  std::vector<char> reduce_scatter_scratch_;
  uint32_t splits_ = 0;  // split() calls so far: names each split's store namespace
  std::vector<uint64_t> send_seq_, recv_seq_;  // per peer, for point-to-point slots
  struct PendingSend {
    std::vector<char> data;  // a copy: the caller's buffer is free once send returns
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    int peer;
  };
  std::deque<std::unique_ptr<PendingSend>> pending_sends_;
};

// What a timeout or a lost connection may mean, for its message.
inline const char* failure_hint(ddph_code_t code) {
  return code == DDPH_TIMEOUT
             ? " (a peer that is slow, stuck, or making a different call: another collective, "
               "length, dtype, op or root)"
             : " (a peer that died, or gave up on this call: after its timeout, e.g. while "
               "making a different call)";
}

template <class Fn>
void Communicator::run(const char* what, Fn&& fn) {
  check_not_broken(what);
  awaited_.clear();
  PostedBuffers posted(*context_);  // freed after the catch below (posted_buffers.h)
  try {
    gloo_call(what, rank(), [&] {
      if constexpr (std::is_invocable_v<Fn&, PostedBuffers&>)
        fn(posted);
      else
        fn();
    });
  } catch (const Error& e) {
    if (e.code() == DDPH_COMM_FAILURE || e.code() == DDPH_TIMEOUT) {
      // Ranks that disagree on a call wait in vain (slots.h): the first to
      // give up times out and closes its connections, which its peers see.
      const std::string who = e.code() == DDPH_TIMEOUT ? who_did_not_answer() : "";
      const Error hinted(
          e.code(), name_peers(e.what()) + (who.empty() ? failure_hint(e.code()) : ": " + who));
      break_with(hinted);
      throw hinted;
    }
    // With operations posted, any failure leaves the peers out of step.
    if (posted.any()) break_with(e);
    throw;
  }
}

}  // namespace comm_gloo
}  // namespace ddph
