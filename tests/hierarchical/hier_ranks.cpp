#include "tests/hierarchical/hier_ranks.h"

#include <cstdio>

namespace ddph_test {
namespace hier {

std::string yaml(const std::string& hook) {
  return "comm: {backend: gloo, timeout: 30s}\nhook: " + hook + "\n";
}

std::string hier_hook(const std::string& inner, int local) {
  return "{family: hierarchical, name: hierarchical, options: {local_size: " +
         std::to_string(local) + "}, wrap: " + inner + "}";
}

std::vector<double> mean_over(const std::vector<std::vector<float>>& rows,
                              const std::vector<int>& ranks) {
  std::vector<double> m(rows[0].size(), 0.0);
  for (int r : ranks)
    for (size_t i = 0; i < m.size(); ++i) m[i] += rows[size_t(r)][i];
  for (double& v : m) v /= double(ranks.size());
  return m;
}

uint64_t cross_machine_bytes(ddph_session_t* s, int rank) {
  ddph_comm_t* c = ddph_session_comm(s);
  if (c->struct_size < DDPH_COMM_SIZE_V1_2 || c->bytes_sent_to == nullptr) return UINT64_MAX;
  ddph_error_free(c->barrier(c->ctx));
  uint64_t sum = 0;
  for (int peer = 0; peer < c->size(c->ctx); ++peer)
    if (machine_of(peer) != machine_of(rank)) sum += c->bytes_sent_to(c->ctx, peer);
  return sum;
}

uint64_t sum_over_ranks(ddph_session_t* s, uint64_t v) {
  ddph_comm_t* c = ddph_session_comm(s);
  int64_t x = int64_t(v), one = 1;
  DLTensor t{&x, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &one, nullptr, 0};
  if (ddph_error_t* e = c->allreduce(c->ctx, &t, &t, DDPH_SUM, nullptr)) {
    std::fprintf(stderr, "allreduce: %s\n", ddph_error_message(e));
    ddph_error_free(e);
    return 0;
  }
  return uint64_t(x);
}

}  // namespace hier
}  // namespace ddph_test
