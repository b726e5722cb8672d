#include "core/comm/call_agreement.h"

#include <ddph/ddph.h>

#include <cstring>
#include <sstream>

#include "core/base/dtype.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace {

uint64_t digest(const int64_t* words, size_t n) {
  return fnv1a64(words, n * sizeof(int64_t));
}

// Sender and receiver compute the same term for a pair whose counts agree.
uint64_t pair_term(int64_t sender, int64_t receiver, int64_t count) {
  const int64_t words[3] = {sender, receiver, count};
  return digest(words, 3);
}

const char* kind_name(int64_t kind) {
  switch (CallKind(kind)) {
    case CallKind::kAllreduce:
      return "allreduce";
    case CallKind::kAllgather:
      return "allgather";
    case CallKind::kReduceScatter:
      return "reduce_scatter";
    case CallKind::kBroadcast:
      return "broadcast";
    case CallKind::kBarrier:
      return "barrier";
    case CallKind::kAlltoallv:
      return "alltoallv";
    case CallKind::kSplit:
      return "split";
  }
  return "an unknown call";
}

}  // namespace

const char* reduce_op_name(int64_t op) {
  switch (op) {
    case DDPH_SUM:
      return "SUM";
    case DDPH_AVG:
      return "AVG";
    case DDPH_MAX:
      return "MAX";
    case DDPH_MIN:
      return "MIN";
  }
  return "?";
}

std::string describe_call(const CallShape& s) {
  std::ostringstream os;
  os << kind_name(s.kind);
  if (s.op >= 0) os << " " << reduce_op_name(s.op);
  if (s.root >= 0) os << " from root " << s.root;
  if (s.numel >= 0) os << " of " << s.numel;
  if (s.dtype >= 0 && s.dtype <= int64_t(DType::U8)) {
    os << (s.numel >= 0 ? " " : " of ") << dtype_name(DType(s.dtype));
    if (s.numel < 0) os << " elements";
  }
  return os.str();
}

bool same_call(const CallShape& a, const CallShape& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.numel == b.numel && a.op == b.op &&
         a.root == b.root;
}

AgreementTerms agreement_terms(const CallShape& shape, int rank, int world,
                               const int64_t* send_counts, const int64_t* recv_counts) {
  int64_t words[kShapeWords];
  std::memcpy(words, &shape, sizeof words);
  AgreementTerms t;
  t.v[0] = digest(words, kShapeWords);
  const uint64_t d = t.v[0];
  t.v[1] = fnv1a64(&d, sizeof d) ^ 0x9e3779b97f4a7c15ull;
  if (send_counts != nullptr && recv_counts != nullptr)
    for (int p = 0; p < world; ++p) {
      t.v[2] += pair_term(rank, p, send_counts[p]);  // what this rank sends to p
      t.v[3] += pair_term(p, rank, recv_counts[p]);  // what it expects from p
    }
  return t;
}

bool all_agree(const AgreementTerms& mine, const AgreementTerms& sum, int world) {
  const uint64_t w = uint64_t(world);
  return sum.v[0] == w * mine.v[0] && sum.v[1] == w * mine.v[1] && sum.v[2] == sum.v[3];
}

std::string describe_disagreement(const std::vector<CallShape>& shapes, int rank) {
  const CallShape& mine = shapes[size_t(rank)];
  std::ostringstream os;
  os << "the ranks are not making the same call: ";
  int listed = 0, others = 0;
  for (size_t r = 0; r < shapes.size(); ++r) {
    if (same_call(shapes[r], mine)) continue;
    if (listed == 4) {
      ++others;
      continue;
    }
    os << (listed == 0 ? "this rank called " + describe_call(mine) + ", but " : std::string(", "))
       << "rank " << r << " called " << describe_call(shapes[r]);
    ++listed;
  }
  if (others > 0) os << " (and " << others << " more ranks differ)";
  if (listed == 0)
    os << "every rank called " << describe_call(mine)
       << ", but the counts do not match: some rank's recv_counts[p] differs from what rank p "
          "sends it";
  os << "; no rank ran it, and the communicator is still usable";
  return os.str();
}

}  // namespace ddph
