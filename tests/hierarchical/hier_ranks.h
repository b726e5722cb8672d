// Helpers of the hierarchical tests: YAML, the simulated machines, exact
// means, and the bytes a rank sent to the other machine.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddph_test {
namespace hier {

constexpr int kWorld = 4;
constexpr int kLocal = 2;  // ranks per simulated machine: {0, 1} and {2, 3}

// "comm: gloo; hook: <hook>"
std::string yaml(const std::string& hook);
// The hierarchical wrapper around `inner` (a YAML flow map), local_size `local`.
std::string hier_hook(const std::string& inner, int local = kLocal);

inline int machine_of(int rank) {
  return rank / kLocal;
}
inline bool is_leader(int rank) {
  return rank % kLocal == 0;
}

// The mean of rows[r][i] over ranks `ranks`, in double.
std::vector<double> mean_over(const std::vector<std::vector<float>>& rows,
                              const std::vector<int>& ranks);

// Bytes this rank has sent, over the session's communicator family, to the
// ranks of the other machines (ddph_comm_t.bytes_sent_to, ABI 1.2), after a
// barrier so that every earlier byte has left. UINT64_MAX without bytes_sent_to.
uint64_t cross_machine_bytes(ddph_session_t* s, int rank);

// The sum of v over the ranks of the session.
uint64_t sum_over_ranks(ddph_session_t* s, uint64_t v);

}  // namespace hier
}  // namespace ddph_test
