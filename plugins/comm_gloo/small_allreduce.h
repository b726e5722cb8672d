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

// Buffers of at most this many bytes take the small path. It sends W - 1
// times the buffer where the ring sends 2 (W - 1) / W of it, and each
// communicator holds 2 W mailboxes of this size: 32 KiB keeps that at
// 64 KiB per rank of the world, and stays below the size where the extra
// bytes cost more than the ring's 4 (W - 1) handshakes on a 1 Gbit/s network
// (about 4 * 100 us * 125 MB/s = 50 KB). docs/benchmarks.md has the
// figures.
constexpr size_t kSmallAllreduceBytes = 32 * 1024;
// Each mailbox message starts with a header of this size and ends with a
// seal of the call's tag (small_allreduce.cpp).
constexpr size_t kSmallHeaderBytes = 48;
constexpr size_t kSmallSealBytes = 8;
constexpr size_t kMailboxBytes = kSmallHeaderBytes + kSmallAllreduceBytes + kSmallSealBytes;
// The send buffer of each pair's socket once gloo has stopped the kernel
// tuning it (mailboxes.h): the top of Linux's own tuning range by default
// (net.ipv4.tcp_wmem). The kernel caps it at twice net.core.wmem_max
// (416 KiB by default), room for the ring's two 1 MiB segments in flight
// only where an administrator raised that limit.
constexpr int kPairSendBufferBytes = 4 << 20;

}  // namespace comm_gloo
}  // namespace ddph
