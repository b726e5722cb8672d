#include "plugins/zero/step_checks.h"

#include <algorithm>
#include <cstring>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {
namespace zero {

std::vector<std::string> allgather_blobs(ddph_comm_t* comm, int world, const std::string& mine,
                                         const std::vector<uint64_t>& known) {
  std::vector<uint64_t> lengths = known;
  if (lengths.empty()) {
    uint64_t length = mine.size();
    lengths.resize(size_t(world));
    FlatTensor send(&length, DType::U8, 8);
    FlatTensor recv(lengths.data(), DType::U8, int64_t(8 * lengths.size()));
    comm_allgather(comm, send, recv, nullptr);
  }
  const size_t widest = size_t(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<char> block(widest, 0), all(widest * size_t(world));
  std::memcpy(block.data(), mine.data(), mine.size());
  FlatTensor send(block.data(), DType::U8, int64_t(widest));
  FlatTensor recv(all.data(), DType::U8, int64_t(all.size()));
  comm_allgather(comm, send, recv, nullptr);
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r)
    out.emplace_back(all.data() + size_t(r) * widest, size_t(lengths[size_t(r)]));
  return out;
}

namespace {

std::string list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < 8; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > 8) out += " and " + std::to_string(items.size() - 8) + " more";
  return out;
}

}  // namespace

std::string full_state_mismatch(const optim::StateMap& full,
                                const std::map<uint64_t, BucketLayout>& layouts) {
  if (full.empty()) return "";
  std::map<optim::ParamKey, size_t> run;  // every parameter's key and element count
  for (const auto& kv : layouts)
    for (size_t i = 0; i < kv.second.keys.size(); ++i)
      run.emplace(kv.second.keys[i], kv.second.numels[i]);
  std::vector<std::string> missing, extra, sizes;
  for (const auto& kv : run) {
    auto found = full.find(kv.first);
    if (found == full.end()) {
      missing.push_back(optim::key_text(kv.first));
      continue;
    }
    const optim::ParamState& st = found->second;
    for (const std::vector<float>* v : {&st.momentum, &st.second, &st.max_second})
      if (!v->empty() && v->size() != kv.second) {
        sizes.push_back(optim::key_text(kv.first) + " has " + std::to_string(kv.second) +
                        " elements, its loaded state " + std::to_string(v->size()));
        break;
      }
  }
  for (const auto& kv : full)
    if (run.count(kv.first) == 0) extra.push_back(optim::key_text(kv.first));
  if (missing.empty() && extra.empty() && sizes.empty()) return "";
  std::string out = "the loaded optimizer state does not fit this run's parameters:";
  if (!missing.empty()) out += " it holds no state for " + list(missing) + ";";
  if (!extra.empty()) out += " it holds state for " + list(extra) + ", which this run has not;";
  if (!sizes.empty()) out += " " + list(sizes) + ";";
  return out +
         " it is the state of another model, or was saved with other parameter ids "
         "(ddph_bucket_t.param_ids)";
}

}  // namespace zero
}  // namespace ddph
