// Checkpoint blobs for every family that keeps state: fed to
// ddph_session_load_state raw (the container format) or as one hook's record
// inside a valid container. A blob is loaded or refused with an error; a
// loaded one must then run a bucket and save again.
//
// The oracle: a blob that load_state accepts must be a valid saved state by
// an independent check of the documented layouts
// (tests/support/checkpoint_layout.h: its own FNV-1a over each frame,
// quantization residuals finite, step counters in range, ...). Accepting
// anything else aborts, as a crash does: a corrupt checkpoint silently
// loaded is a finding.
//
// A mutated blob almost never has a valid checksum, so an input may ask the
// target to seal it: the last 8 bytes become the FNV-1a of the rest (the
// hook's frame for a record input, the container's for a whole blob). Sealed
// inputs reach the checks behind the checksum: lengths, non-finite
// residuals, out-of-range steps, flags.
//
// DDPH_FUZZ_WRITE_SEEDS=DIR: writes each session's real saved state after
// three steps into DIR (as a raw input and as a record input), for the
// committed corpus, and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "conformance/lent_bucket.h"
#include "tests/fuzz/fuzz_session.h"
#include "tests/support/checkpoint_layout.h"

namespace {

namespace layout = ddph_test::layout;

// One session per stateful family (and both post_localsgd hooks, in one
// chain); their order fixes what an input's first byte picks.
const std::vector<std::string>& stateful() {
  static const std::vector<std::string> v = {
      "{family: quantization, name: per_channel, options: {protocol: reduce_scatter, "
      "error_feedback: true, channel_size: 16}}",
      "{family: powersgd, name: powersgd, options: {rank: 2, start_iter: 2}}",
      "{family: powersgd, name: batched_powersgd, options: {rank: 2, start_iter: 2}}",
      "{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1}}",
      "{family: post_localsgd, name: model_averaging, options: {period: 2}, wrap: {family: "
      "post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1}}}",
      "{family: optimizer_overlap, name: hook_then_optimizer, options: {optimizer: adam, "
      "amsgrad: true}, wrap: {family: default, name: allreduce}}",
      "{family: hierarchical, name: hierarchical, wrap: {family: quantization, name: "
      "per_tensor, options: {error_feedback: true, bits: 4}}}",
  };
  return v;
}

// Never destroyed (nor closed): the sessions live as long as the process,
// and stay reachable for LeakSanitizer's check at exit.
std::vector<ddph_session_t*>& sessions() {
  static auto& s = *new std::vector<ddph_session_t*>(ddph_fuzz::open_sessions(stateful()));
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

// The records of each pristine state: a record input replaces one of them.
std::vector<std::vector<layout::Record>>& pristine_records() {
  static auto& r = *new std::vector<std::vector<layout::Record>>([] {
    std::vector<std::vector<layout::Record>> v;
    for (const std::string& blob : pristine()) {
      std::vector<layout::Record> records;
      std::string why;
      if (!layout::valid_session_state(blob, &why) ||
          !layout::parse_container(blob, &records, &why) || records.empty()) {
        std::fprintf(stderr, "fuzz setup: a fresh session's saved state is not valid: %s\n",
                     why.c_str());
        std::abort();
      }
      v.push_back(records);
    }
    return v;
  }());
  return r;
}

// data[1]: bit 0 a record input (else the whole blob), bit 1 seal it, the
// rest the record's position.
constexpr int kWhole = 0, kRecord = 1, kSeal = 2;

// The blob with its last 8 bytes made the FNV-1a 64 of the bytes before
// them (little-endian), as a frame's checksum is.
std::string sealed(std::string blob) {
  if (blob.size() < 8 + 4 + 8) return blob;
  uint64_t h = layout::fnv1a64(blob.substr(0, blob.size() - 8));
  for (size_t i = blob.size() - 8; i < blob.size(); ++i, h >>= 8) blob[i] = char(uint8_t(h));
  return blob;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Three steps on every session, then its state as a raw input and each of
// its records as a record input.
void write_seeds(const std::string& dir) {
  for (size_t i = 0; i < sessions().size(); ++i) {
    for (uint64_t step = 0; step < 3; ++step) {
      ddph::plugin_checks::LentBucket b(64, 8, 8);
      for (size_t k = 0; k < b.data.size(); ++k) b.data[k] = float(int(k * 7 + step) % 13) - 6;
      b.b.step = step;
      if (ddph_fuzz::run(sessions()[i], &b.b) != DDPH_OK) {
        std::fprintf(stderr, "seeds: session %zu failed a step\n", i);
        std::exit(1);
      }
    }
    const std::string blob = save(sessions()[i]);
    std::vector<layout::Record> records;
    std::string why;
    if (!layout::valid_session_state(blob, &why) ||
        !layout::parse_container(blob, &records, &why)) {
      std::fprintf(stderr, "seeds: session %zu saved an invalid state: %s\n", i, why.c_str());
      std::exit(1);
    }
    const std::string which(1, char(i)), name = std::to_string(i);
    write_file(dir + "/saved_" + name, which + char(kWhole) + blob);
    write_file(dir + "/sealed_" + name, which + char(kWhole | kSeal) + blob);
    for (size_t r = 0; r < records.size(); ++r) {
      const std::string record = name + "_" + std::to_string(r);
      write_file(dir + "/record_" + record, which + char(kRecord | 4 * r) + records[r].blob);
      write_file(dir + "/sealed_record_" + record,
                 which + char(kRecord | kSeal | 4 * r) + records[r].blob);
    }
  }
  std::exit(0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pristine_records();
  if (const char* dir = std::getenv("DDPH_FUZZ_WRITE_SEEDS")) write_seeds(dir);
  return 0;
}

// data[0] picks the session; data[1] says how to read the rest (kRecord:
// one hook's record, which data[1] >> 2 picks, in the session's own valid
// container; kSeal: with its checksum made valid).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t which = data[0] % stateful().size();
  ddph_session_t* s = sessions()[which];
  ddph_error_free(ddph_session_load_state(s, pristine()[which].data(), pristine()[which].size()));
  std::string blob(reinterpret_cast<const char*>(data + 2), size - 2);
  if (data[1] & kSeal) blob = sealed(blob);
  if (data[1] & kRecord) {
    std::vector<layout::Record> records = pristine_records()[which];
    records[size_t(data[1] >> 2) % records.size()].blob = blob;
    blob = layout::container(records);
  }
  ddph_error_t* e = ddph_session_load_state(s, blob.data(), blob.size());
  if (e != nullptr) {
    ddph_error_free(e);
    return 0;
  }
  std::string why;
  if (!layout::valid_session_state(blob, &why)) {
    std::fprintf(stderr,
                 "fuzz_state: session %zu (%s) accepted a blob that is not a valid saved "
                 "state: %s\n",
                 which, stateful()[which].c_str(), why.c_str());
    std::abort();
  }
  // Loaded: the state must be usable.
  ddph::plugin_checks::LentBucket b(64, 8, 8);
  (void)ddph_fuzz::run(s, &b.b);
  (void)save(s);
  return 0;
}
