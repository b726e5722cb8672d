#include "plugins/hierarchical/leader_status.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {
namespace hierarchical {
namespace {

// A fixed-size record, so that every rank posts the same broadcast size.
constexpr size_t kRecord = 512;

}  // namespace

void Outcome::agree(ddph_comm_t* leaders, const char* what) {
  // The failing codes are small positive numbers: MAX finds one of them.
  int32_t code = int32_t(code_);
  FlatTensor t(&code, DType::I32, 1);
  comm_allreduce(leaders, t, DDPH_MAX, nullptr);
  if (code != DDPH_OK && ok()) {
    code_ = ddph_code_t(code);
    message_ = std::string(what) + " failed on another machine's leader (" + code_name(code_) +
               "); its error is in that rank's log";
  }
}

void Outcome::share_from_leader(ddph_comm_t* local, int world_rank_of_leader, const char* what) {
  std::vector<char> record(kRecord, 0);
  int32_t code = int32_t(code_);
  std::memcpy(record.data(), &code, sizeof code);
  std::strncpy(record.data() + sizeof code, message_.c_str(), kRecord - sizeof code - 1);
  FlatTensor t(record.data(), DType::U8, int64_t(kRecord));
  comm_broadcast(local, t, 0, nullptr);
  std::memcpy(&code, record.data(), sizeof code);
  if (code == DDPH_OK || !ok()) return;  // the leader's own failure is already here
  code_ = ddph_code_t(code);
  message_ = std::string(what) + " failed on this machine's leader, rank " +
             std::to_string(world_rank_of_leader) + ": " + (record.data() + sizeof code);
}

void Outcome::rethrow() const {
  if (!ok()) throw Error(code_, message_);
}

}  // namespace hierarchical
}  // namespace ddph
