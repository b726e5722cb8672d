// Where comm_gloo's allreduce switches from one exchange through the
// mailboxes (small_allreduce.cpp) to the ring (ring_allreduce.cpp).
//
// Both are wire constants: every rank of a job must use the same (gloo
// aborts the process when a message is longer than the mailbox it lands
// in, mailboxes.h).
#pragma once

#include <cstddef>

namespace ddph {
namespace comm_gloo {

// Buffers of at most small_allreduce_limit(W) bytes take the small path.
// It sends W - 1 times the buffer where the ring sends 2 (W - 1) / W of
// it, and each communicator holds 2 W mailboxes of that size. 32 KiB stays
// below the size where, at four ranks, the extra bytes cost more than the
// ring's 4 (W - 1) handshakes on a 1 Gbit/s network (docs/benchmarks.md).
// Above 64 ranks the limit shrinks so that the mailboxes stay within
// kSmallMailboxMemory per communicator, and each call sends at most
// about as much.
constexpr size_t kSmallAllreduceBytes = 32 * 1024;
constexpr size_t kSmallMailboxMemory = size_t(4) << 20;
// Each mailbox message starts with a header of this size and ends with a
// seal of the call's tag (small_allreduce.cpp).
constexpr size_t kSmallHeaderBytes = 48;
constexpr size_t kSmallSealBytes = 8;

// The small path's limit at world size W, a multiple of 8 bytes (the
// largest element); 0 (no small path, no mailboxes) above 262,144 ranks.
constexpr size_t small_allreduce_limit(int world) {
  const size_t share = kSmallMailboxMemory / (2 * size_t(world > 1 ? world : 1)) / 8 * 8;
  return share < kSmallAllreduceBytes ? share : kSmallAllreduceBytes;
}
// A mailbox's size: the longest message at world size W.
constexpr size_t mailbox_bytes(int world) {
  return kSmallHeaderBytes + small_allreduce_limit(world) + kSmallSealBytes;
}
// The send buffer of each pair's socket once gloo has stopped the kernel
// tuning it (mailboxes.h): the top of Linux's own tuning range by default
// (net.ipv4.tcp_wmem). The kernel caps it at twice net.core.wmem_max
// (416 KiB by default), room for the ring's two 1 MiB segments in flight
// only where an administrator raised that limit.
constexpr int kPairSendBufferBytes = 4 << 20;

}  // namespace comm_gloo
}  // namespace ddph
