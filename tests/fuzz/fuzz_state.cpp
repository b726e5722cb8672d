// Checkpoint blobs for every family that keeps state: fed to
// ddph_session_load_state raw (the container format) or wrapped in a valid
// container as the hook's own record. A blob is loaded or refused with an
// error; a loaded one must then run a bucket and save again.
#include <cstdint>
#include <string>
#include <vector>

#include "loader/state_blob.h"
#include "tests/fuzz/fuzz_session.h"
#include "loader/tool/lent_bucket.h"

namespace {

struct Stateful {
  std::string family, hook, yaml;
};

const std::vector<Stateful>& stateful() {
  static const std::vector<Stateful> v = {
      {"quantization", "per_channel",
       "{family: quantization, name: per_channel, options: {protocol: reduce_scatter, "
       "error_feedback: true, channel_size: 16}}"},
      {"powersgd", "powersgd",
       "{family: powersgd, name: powersgd, options: {rank: 2, start_iter: 2}}"},
      {"powersgd", "batched_powersgd",
       "{family: powersgd, name: batched_powersgd, options: {rank: 2, start_iter: 2}}"},
      {"post_localsgd", "post_localsgd",
       "{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1}}"},
  };
  return v;
}

// Never destroyed (nor closed): the sessions live as long as the process,
// and stay reachable for LeakSanitizer's check at exit.
std::vector<ddph_session_t*>& sessions() {
  static auto& s = *new std::vector<ddph_session_t*>([] {
    std::vector<std::string> yaml;
    for (const Stateful& h : stateful()) yaml.push_back(h.yaml);
    return ddph_fuzz::open_sessions(yaml);
  }());
  return s;
}

std::string save(ddph_session_t* s) {
  std::string out;
  ddph_error_free(ddph_session_save_state(
      s,
      [](void* sink, const void* bytes, size_t n) {
        static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
      },
      &out));
  return out;
}

// Each session's state right after it opened: every input starts from it,
// so an input's outcome never depends on the inputs before it.
std::vector<std::string>& pristine() {
  static auto& p = *new std::vector<std::string>([] {
    std::vector<std::string> v;
    for (ddph_session_t* s : sessions()) v.push_back(save(s));
    return v;
  }());
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pristine();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t which = data[0] % stateful().size();
  ddph_session_t* s = sessions()[which];
  ddph_error_free(ddph_session_load_state(s, pristine()[which].data(), pristine()[which].size()));
  std::string blob(reinterpret_cast<const char*>(data + 2), size - 2);
  if (data[1] & 1)
    blob = ddph::loader::encode_state({{stateful()[which].family, stateful()[which].hook, blob}});
  ddph_error_t* e = ddph_session_load_state(s, blob.data(), blob.size());
  if (e != nullptr) {
    ddph_error_free(e);
    return 0;
  }
  // Loaded: the state must be usable.
  ddph_validate::LentBucket b(64, 8, 8);
  (void)ddph_fuzz::run(s, &b.b);
  (void)save(s);
  return 0;
}
