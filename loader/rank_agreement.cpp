#include "loader/rank_agreement.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/comm_call.h"
#include "core/error.h"
#include "core/le_bytes.h"
#include "core/tensor.h"

namespace ddph {
namespace loader {
namespace {

void describe_chain(const ResolvedHook& h, std::ostringstream& out) {
  out << h.plugin->family() << "/" << h.hook->name << "{";
  for (size_t i = 0; i < h.options.size(); ++i) {
    const ddph_option_t& o = h.options.data()[i];
    out << o.name << "=";
    switch (o.type) {
      case DDPH_BOOL:
        out << (o.value.b ? "true" : "false");
        break;
      case DDPH_INT:
        out << o.value.i;
        break;
      case DDPH_FLOAT:
        out << std::hexfloat << o.value.f << std::defaultfloat;  // exact
        break;
      default:
        out << '"' << (o.value.s ? o.value.s : "") << '"';
    }
    out << ";";
  }
  out << "}";
  if (h.inner) {
    out << " wrapping ";
    describe_chain(*h.inner, out);
  }
}

// Every rank's `mine` (n int64 values), gathered.
std::vector<int64_t> gather(ddph_comm_t* comm, const int64_t* mine, size_t n) {
  std::vector<int64_t> all(n * size_t(comm_size(comm)));
  FlatTensor send(const_cast<int64_t*>(mine), DType::I64, int64_t(n));
  FlatTensor recv(all.data(), DType::I64, int64_t(all.size()));
  comm_allgather(comm, send, recv, nullptr);
  return all;
}

std::string dtype_text(int64_t code, int64_t bits, int64_t lanes) {
  DLDataType t{uint8_t(code), uint8_t(bits), uint16_t(lanes)};
  char buf[32];
  return dl_dtype_text(t, buf);
}

}  // namespace

std::string job_signature(const Job& job) {
  std::ostringstream out;
  describe_chain(*job.hook, out);
  for (const ResolvedRule& rule : job.rules) {
    out << "; rule <= " << rule.max_bytes << ": ";
    describe_chain(*rule.hook, out);
  }
  return out.str();
}

void agree_on_job(ddph_comm_t* comm, const Job& job) {
  if (comm_size(comm) == 1) return;
  const std::string text = job_signature(job);
  const int64_t mine = int64_t(fnv1a64(text.data(), text.size()));
  const std::vector<int64_t> all = gather(comm, &mine, 1);
  std::string differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  DDPH_CHECK(differ.empty(), DDPH_INVALID_ARGUMENT,
             "the ranks disagree on the hook configuration: rank"
                 << (differ.find(',') == std::string::npos ? " " : "s ") << differ
                 << " differ from rank 0 (this rank, " << comm_rank(comm) << ", has " << text
                 << ")");
}

void BucketLayouts::check(ddph_comm_t* comm, const ddph_bucket_t& bucket) {
  const DLTensor& b = bucket.buffer;
  const Layout mine = {int64_t(bucket.index), numel(b),
                       int64_t(b.dtype.code) << 32 | int64_t(b.dtype.bits) << 16 | b.dtype.lanes,
                       int64_t(b.device.device_type)};
  auto known = agreed_.find(bucket.index);
  if (known != agreed_.end() && known->second == mine) return;
  const int world = comm_size(comm);
  if (world > 1) {
    const std::vector<int64_t> all = gather(comm, mine.data(), mine.size());
    for (int r = 0; r < world; ++r) {
      const int64_t* theirs = all.data() + size_t(r) * mine.size();
      if (std::equal(mine.begin(), mine.end(), theirs)) continue;
      auto what = [](const int64_t* l) {
        std::ostringstream s;
        s << "bucket " << l[0] << " of " << l[1] << " "
          << dtype_text(l[2] >> 32, (l[2] >> 16) & 0xffff, l[2] & 0xffff)
          << " elements on device type " << l[3];
        return s.str();
      };
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, "the ranks submitted different buckets: rank "
                                           << comm_rank(comm) << " has " << what(mine.data())
                                           << ", rank " << r << " has " << what(theirs)
                                           << "; every rank must submit the "
                                              "same buckets in the same order");
    }
  }
  agreed_[bucket.index] = mine;
}

}  // namespace loader
}  // namespace ddph
