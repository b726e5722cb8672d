#include "plugins/zero/step_checks.h"

#include <vector>

#include "core/comm/comm_call.h"
#include "core/hook/allgather_v.h"
#include "plugins/zero/shard_state.h"

namespace ddph {
namespace zero {
namespace {

// What each rank tells the others before a step's parameters move, as
// words: its run id, the run of the shards it loaded since the last step,
// and the length of its problems (the texts follow in a second exchange
// when a rank has any).
struct Verdict {
  uint64_t run_id = 0, loaded_run = 0, problem_bytes = 0;
};
static_assert(sizeof(Verdict) == 3 * sizeof(uint64_t), "exchanged as words");

// Up to 8 items, then how many more.
std::string list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < 8; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > 8) out += " and " + std::to_string(items.size() - 8) + " more";
  return out;
}

}  // namespace

StepVerdict agree_on_step(ddph_comm_t* comm, uint64_t run_id, uint64_t loaded_run,
                          const std::string& problems) {
  const int world = comm_size(comm);
  const Verdict own{run_id, loaded_run, problems.size()};
  std::vector<Verdict> all(1, own);
  std::vector<std::string> texts(1, problems);
  if (world > 1) {
    all = allgather_each(comm, own);
    std::vector<uint64_t> lengths;
    for (const Verdict& v : all) lengths.push_back(v.problem_bytes);
    texts = allgather_v(comm, problems, lengths);
  }
  StepVerdict out;
  std::string& why = out.why;
  for (int r = 0; r < world; ++r)
    if (all[size_t(r)].problem_bytes > 0)
      why += (why.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") + texts[size_t(r)];
  // Shards of different runs: each rank's load is its own, so only the
  // ranks together can see that they do not belong together.
  int first_loaded = -1;
  for (int r = 0; r < world; ++r) {
    const Verdict& v = all[size_t(r)];
    if (v.loaded_run == 0) continue;
    if (first_loaded < 0) {
      first_loaded = r;
    } else if (v.loaded_run != all[size_t(first_loaded)].loaded_run) {
      why += std::string(why.empty() ? "" : "; ") + "rank " + std::to_string(first_loaded) +
             " loaded the state of run " + run_id_text(all[size_t(first_loaded)].loaded_run) +
             " and rank " + std::to_string(r) + " that of run " + run_id_text(v.loaded_run) +
             ": shards of different runs do not belong together; load the shards that the "
             "ranks of one run saved at one step";
      break;
    }
  }
  out.run_id = first_loaded >= 0 ? all[size_t(first_loaded)].loaded_run : all[0].run_id;
  return out;
}

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
