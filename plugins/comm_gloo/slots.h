// The slots (gloo's message tags) of ddph's collectives.
//
// A slot is [prefix: 8 bits][agreement: 24 bits][sequence: 32 bits]. The
// prefix keeps each kind of call apart from the others and from gloo's own
// slots (whose prefixes are small numbers). The sequence is the call's tag
// (or, point to point, the pair's message count). The agreement is a digest
// of what both ends of a message must agree on: its length, the dtype, the
// op, the root, the collective.
//
// Why the agreement: gloo aborts the whole process when a message is longer
// than the receive posted for it (tcp/pair.cc enforces preamble.length <=
// nbytes on its device thread), which is how ranks calling with different
// sizes used to die. With the digest in the slot, disagreeing ranks post
// different slots and their messages never pair: the first rank to give up
// gets DDPH_TIMEOUT, and peers still waiting then see its connections close
// (DDPH_COMM_FAILURE); both messages say what may have happened. A
// different op, dtype or root, which would have given silently wrong
// results, ends the same way.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace ddph {
namespace comm_gloo {

constexpr uint8_t kBarrierSlot = 0x79;
constexpr uint8_t kBroadcastSlot = 0x7a;
constexpr uint8_t kExchangeSlot = 0x7b;
constexpr uint8_t kRingSlot = 0x7c;
constexpr uint8_t kP2PSlot = 0x7d;
// The bound buffers of mailboxes.h, two per pair (kMailboxSlot + parity):
// gloo keeps bound and unbound slots apart, and ddph uses no other bound
// buffer. Their messages carry their agreement in a header instead.
constexpr int kMailboxSlot = 0x7e << 24;

// A digest of the values both ends must agree on (sizes, codes, FNV-1a of
// names), mixed so that any difference changes about half its bits.
inline uint64_t agreement(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t v : values) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  }
  return h;
}

inline uint64_t name_code(const char* name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *name != '\0'; ++name) h = (h ^ uint8_t(*name)) * 0x100000001b3ull;
  return h;
}

inline uint64_t slot(uint8_t prefix, uint64_t agreed, uint64_t sequence) {
  return uint64_t(prefix) << 56 | (agreed >> 40) << 32 | (sequence & 0xffffffffu);
}

}  // namespace comm_gloo
}  // namespace ddph
