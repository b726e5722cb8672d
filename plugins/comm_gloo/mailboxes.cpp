#include "plugins/comm_gloo/mailboxes.h"

#include <gloo/transport/pair.h>

#include "plugins/comm_gloo/slots.h"

namespace ddph {
namespace comm_gloo {

Mailboxes::Mailboxes(::gloo::Context& context, int rank, int world, size_t capacity)
    : context_(context),
      rank_(rank),
      world_(world),
      capacity_(capacity),
      memory_(2 * size_t(world) * capacity),
      sends_(2 * size_t(world)),
      inboxes_(2 * size_t(world)) {
  for (int parity = 0; parity < 2; ++parity) {
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      auto& pair = context_.getPair(peer);
      const int slot = kMailboxSlot + parity;
      inboxes_[index(peer, parity)] = pair->createRecvBuffer(slot, box(peer, parity), capacity_);
      sends_[index(peer, parity)] = pair->createSendBuffer(slot, outbox(parity), capacity_);
    }
  }
}

Mailboxes::~Mailboxes() {
  // A gloo Buffer unregisters itself from its pair when destroyed, but the
  // pair's device thread may be halfway through a peer's message into it
  // (a peer that made one more call than this rank) and would go on writing
  // into freed memory. setSync takes the pair's socket off the device
  // thread's epoll (waiting for its current pass to end), after which
  // nothing reads from it again. It throws for a pair that is already
  // closed (the device thread no longer reads those either). Every healthy
  // collective has awaited its sends, so there is nothing left for setSync
  // to flush.
  for (int peer = 0; peer < world_; ++peer) {
    if (peer == rank_) continue;
    try {
      auto& pair = context_.getPair(peer);
      if (pair) pair->setSync(true, false);
    } catch (...) {
    }
  }
  sends_.clear();
  inboxes_.clear();
}

void Mailboxes::prime() {
  for (int peer = 0; peer < world_; ++peer)
    if (peer != rank_) send(peer, 1, capacity_);
  for (int peer = 0; peer < world_; ++peer)
    if (peer != rank_) receive(peer, 1);
  for (int peer = 0; peer < world_; ++peer)
    if (peer != rank_) wait_send(peer, 1);
}

void Mailboxes::send(int peer, int parity, size_t bytes) {
  sends_[index(peer, parity)]->send(0, bytes, 0);
}

void Mailboxes::wait_send(int peer, int parity) {
  sends_[index(peer, parity)]->waitSend();
}

char* Mailboxes::receive(int peer, int parity) {
  inboxes_[index(peer, parity)]->waitRecv();
  return box(peer, parity);
}

}  // namespace comm_gloo
}  // namespace ddph
