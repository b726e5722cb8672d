// Allgathers of host bytes that the ranks tell each other beside the
// buckets (a rank's checkpoint pieces, the problems it found, a hash): each
// rank's value, whatever its length, to every rank, in rank order. Host
// memory, no stream; collective on comm, so every rank calls the same one.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {

// Every rank's `mine`, in rank order: an allgather of the lengths, then one
// of the bytes, each rank's padded to the longest.
std::vector<std::string> allgather_v(ddph_comm_t* comm, const std::string& mine);

// The same when every rank already knows every rank's length (lengths[r],
// rank r's, the same on every rank): the bytes alone, one allgather, none
// when every length is 0. Throws DDPH_INVALID_ARGUMENT when lengths does
// not hold one length per rank or this rank's is not mine's.
std::vector<std::string> allgather_v(ddph_comm_t* comm, const std::string& mine,
                                     const std::vector<uint64_t>& lengths);

// Every rank's `mine`, a value of fixed size (a hash, a struct of words),
// in rank order: one allgather of its bytes.
template <class T>
std::vector<T> allgather_each(ddph_comm_t* comm, const T& mine) {
  static_assert(std::is_trivially_copyable<T>::value, "sent as its bytes");
  std::vector<T> all(static_cast<size_t>(comm_size(comm)));
  FlatTensor send(const_cast<T*>(&mine), DType::U8, int64_t(sizeof(T)));
  FlatTensor recv(all.data(), DType::U8, int64_t(sizeof(T) * all.size()));
  comm_allgather(comm, send, recv, nullptr);
  return all;
}

}  // namespace ddph
