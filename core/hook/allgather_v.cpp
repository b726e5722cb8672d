#include "core/hook/allgather_v.h"

#include <algorithm>
#include <cstring>

#include "core/base/error.h"

namespace ddph {

std::vector<std::string> allgather_v(ddph_comm_t* comm, const std::string& mine) {
  return allgather_v(comm, mine, allgather_each<uint64_t>(comm, mine.size()));
}

std::vector<std::string> allgather_v(ddph_comm_t* comm, const std::string& mine,
                                     const std::vector<uint64_t>& lengths) {
  const int world = comm_size(comm), rank = comm_rank(comm);
  DDPH_CHECK(lengths.size() == size_t(world) && lengths[size_t(rank)] == mine.size(),
             DDPH_INVALID_ARGUMENT,
             "allgather_v: rank " << rank << " of " << world << " was given " << lengths.size()
                                  << " lengths for " << mine.size()
                                  << " bytes of its own; it needs one per rank, its own the "
                                     "length of its bytes");
  const size_t widest = size_t(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<std::string> out(static_cast<size_t>(world));
  if (widest == 0) return out;  // every rank knows it: none calls the collective
  std::vector<char> block(widest, 0), all(widest * size_t(world));
  std::memcpy(block.data(), mine.data(), mine.size());
  FlatTensor send(block.data(), DType::U8, int64_t(widest));
  FlatTensor recv(all.data(), DType::U8, int64_t(all.size()));
  comm_allgather(comm, send, recv, nullptr);
  for (size_t r = 0; r < size_t(world); ++r)
    out[r].assign(all.data() + r * widest, size_t(lengths[r]));
  return out;
}

}  // namespace ddph
