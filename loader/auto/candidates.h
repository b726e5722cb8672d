// `hook: {family: auto, name: auto}` (docs/auto.md): the hook chains the
// chooser may run a bucket with, and the options that steer it. The loader
// resolves an auto hook into one ordinary hook chain per candidate; nothing
// here runs a bucket.
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <string>
#include <vector>

#include "loader/job/config.h"

namespace ddph {
namespace loader {

// The ranks' exchange has room for this many candidates, and measures
// this many buckets of a step apart (later ones share the last one's).
constexpr size_t kMaxCandidates = 8;
constexpr size_t kMaxSlots = 32;

// The family and hook name that select the chooser.
constexpr const char* kAutoFamily = "auto";
constexpr const char* kAutoHook = "auto";

// A candidate as the chooser knows it.
struct CandidateInfo {
  std::string name;  // as written in `candidates`
  // Gradient bytes per byte on the wire, as the chooser assumes before it
  // has measured (max_compression, the link model): 1 allreduce, 2 fp16
  // and bf16, 4 8-bit, 8 4-bit, 16 PowerSGD rank 4; 1 for a family/hook.
  double nominal_ratio = 1;
  // Nanoseconds of computation per gradient byte that deterministic mode
  // assumes (no timing there): round figures from docs/performance.md.
  double cpu_ns_per_byte = 0;
  // Steps a bucket runs on it before its time is taken: 1 (the first use
  // allocates), 2 for PowerSGD (its first step is uncompressed, start_iter 2)
  // and for a family/hook, whose warm-up is not known.
  uint64_t settle_steps = 1;
  // Beyond 8-bit (4-bit, PowerSGD): held back after a norm jump. 8-bit
  // with its per-channel scales stays, as Accordion moves to a milder
  // compression rather than none, so that a slow link is not left to fp32.
  bool lossy() const { return nominal_ratio > 4; }
};

// One candidate as the user names it: a built-in short name ("q4ef") or
// "family/hook" with that hook's default options.
struct CandidateSpec {
  CandidateInfo info;
  HookSpec hook;  // the hook it stands for, its key "hook.options.candidates[i]"
};

// What steers the chooser; every field but the candidates an option of the
// auto hook.
struct AutoSettings {
  int64_t warmup_steps = 8;      // the least compressed candidate only
  double explore_share = 0.03;   // of the run's bucket time, for exploring again
  int64_t recheck_steps = 5;     // the ranks compare measurements this often
  double drift = 1;              // a bucket's time x or / (1 + drift) re-explores
  double norm_jump = 1;          // the gradient norm x or / (1 + norm_jump): held back (0: off)
  int64_t hold_steps = 10;       // lossy candidates held back after a jump
  double max_compression = 1e6;  // largest nominal ratio allowed
  // A lossy candidate converges less per step: it runs only where it
  // shortens the step by more than this share of it.
  double lossy_margin = 0.25;
  bool deterministic = false;  // decide from the stated link, never from timings
  double link_mbit = 0;        // deterministic mode's link rate
};

// The auto hook's option schema (for `ddph plugins`-style listings and the
// YAML checks).
const std::vector<ddph_option_spec_t>& auto_option_specs();

// The built-in short names, in the default order, as "allreduce, fp16, ...".
std::string builtin_candidate_names();

// Reads the auto hook's options into *settings and its candidates. Problems
// (an unknown option, an empty candidate list, an unknown short name, a
// candidate named twice, deterministic without link_mbit) go to problems,
// under spec.key.
std::vector<CandidateSpec> parse_auto_options(const HookSpec& spec, Problems& problems,
                                              AutoSettings* settings);

}  // namespace loader
}  // namespace ddph
