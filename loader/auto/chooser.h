// The auto hook's decisions (docs/auto.md): which candidate runs each bucket
// of a step, from what the ranks measured. Pure logic, no communicator: the
// session (loader/session/auto_steps.cpp) hands it each rank's timings,
// runs the exchange it asks for, and feeds back the ranks' combined report.
//
// Every decision is taken at a step boundary from the combined report
// alone (the ranks' reports combined by MAX: the norm and the period are
// the largest over the ranks, the buckets' times the smallest, which is
// the last rank to reach a bucket's: the others add their wait for it), so
// every rank takes the same one whatever it measured.
// Between exchanges the plan is a fixed function of the last decision.
//
// Phases: warm-up (the least compressed candidate), a round of exploring
// (each candidate runs every bucket for explore_steps() steps, the most
// compressed first; one whose time, scaled from the reference by its wire
// bytes, or predicted by the link model after a slowdown, is far above the
// best already measured is skipped), then each
// bucket runs its fastest candidate (a lossy one only where it shortens
// the whole step by lossy_margin), or a less compressed one where the
// backward still runs after the bucket is submitted and hides the extra
// time (the step ends no later). Every recheck_steps the ranks compare
// again: a bucket whose time drifted past `drift` starts a new round, if
// the exploring so far cost less than explore_share of the run; a gradient
// norm that jumped by norm_jump (Accordion's test) holds lossy candidates
// back for hold_steps.
#pragma once

#include <ddph/ddph.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "loader/auto/candidates.h"

namespace ddph {
namespace loader {

// A ddph_choice_reason_t as the metrics' readers spell it: "fixed",
// "warmup", "explore", "fastest", "critical", "model"; "reason N" for a
// value this build does not know.
std::string choice_reason_name(int32_t reason);

struct Pick {
  int candidate = 0;
  ddph_choice_reason_t reason = DDPH_CHOICE_WARMUP;
  bool settled = false;  // the candidate ran this slot its settle_steps steps before too
  uint64_t step = 0;     // the chooser's own step count, for measured()
};

class Chooser {
 public:
  // A bucket's first settle_steps on a candidate are not timed (the first
  // use of a hook allocates; PowerSGD compresses from its third step), then
  // this many are, when exploring.
  static constexpr uint64_t kTimedSteps = 2;
  uint64_t explore_steps(int c) const { return candidates_[size_t(c)].settle_steps + kTimedSteps; }
  // A candidate within this share of the fastest, and less compressed, wins.
  static constexpr double kPreferLessCompressed = 0.05;
  // A candidate whose scaled time is this many times the best is skipped.
  static constexpr double kSkipFactor = 1.5;
  // A bucket's drift starts a round only when its time moved by this share
  // of the step too.
  static constexpr double kMaterialShare = 0.1;
  // A compressed candidate's time hardly changes when the link gets
  // faster, so no drift shows it: after this many exchanges without a
  // round, one starts anyway (within explore_share), timing the least
  // compressed candidate first, the link model's reference.
  static constexpr uint64_t kProbeRechecks = 20;
  // Slot::predicted of a candidate the round after a slowdown has timed.
  static constexpr double kTimedOnTheNewLink = -1;
  // The weight of the newest check in the running mean of gradient norms.
  static constexpr double kNormWeight = 0.3;
  // The exchange: norm, the buckets' seconds, a new-bucket flag, then
  // kMaxSlots x kMaxCandidates mean seconds, then per slot the backward's
  // time after it, then the mean step period and how many steps the
  // window timed. Seconds of the buckets and the backward travel as
  // 1 / (1 + seconds), so that the exchange's MAX takes the smallest (0:
  // not measured).
  static constexpr size_t kAheadWord = 3 + kMaxSlots * kMaxCandidates;
  static constexpr size_t kStepWord = kAheadWord + kMaxSlots;
  static constexpr size_t kReportWords = kStepWord + 2;

  Chooser(const AutoSettings& settings, std::vector<CandidateInfo> candidates, int world_size);

  // Before a step's first bucket: starts the step; true when the ranks
  // must exchange reports (report, then agreed) before its buckets run.
  bool begin_step();
  // This rank's report since the last exchange.
  std::vector<double> report() const;
  // The ranks' reports combined by MAX, element by element: decides.
  void agreed(const std::vector<double>& combined);
  // The candidate for the bucket in `slot` of the step begun last.
  Pick pick(uint32_t slot, uint64_t bytes);
  // Whether this step's buckets should add their squared norms.
  bool wants_norm() const { return in_step_ && st_.norm_step == step_; }
  // [thread-safe] A bucket's squared gradient norm on this rank.
  void add_norm_sq(double sum_sq);
  // [thread-safe] A bucket's time on this rank, for the pick it ran with.
  void measured(const Pick& pick, uint32_t slot, double seconds);
  // [thread-safe] A finished step on this rank: for each of its buckets in
  // submission order, the seconds from its submission to the last one's
  // (how long the backward ran on: what can hide its reduction; negative:
  // not known), and the seconds from its first bucket's submission to the
  // next step's (its period; negative: not known).
  void finished_step(const std::vector<double>& ahead, double period);

  // The decisions of the last exchange, as a log line: "step 40: bucket 0
  // (7.5 MB): q4ef, fastest (q4ef 8.1 ms, q8 9.0 ms, ...)".
  const std::string& last_decision() const { return last_decision_; }
  // Whether the last exchange changed a bucket's candidate or reason, or
  // the phase (what is worth a log line at info level).
  bool decision_changed() const { return changed_; }
  const std::vector<CandidateInfo>& candidates() const { return candidates_; }
  double exploration_seconds() const { return st_.explore_cost; }

  // Checkpoints: everything above but this rank's window. load throws
  // DDPH_INVALID_ARGUMENT on a corrupt blob or other candidates; a blob
  // from another world size is not loaded (returns false: start fresh).
  std::string save() const;
  bool load(const void* bytes, size_t n);

 private:
  enum class Phase : uint32_t { kWarmup = 0, kExplore = 1, kExploit = 2 };
  struct Slot {
    uint64_t bytes = 0;
    std::array<double, kMaxCandidates> agreed{};  // mean seconds; 0: unknown
    // After the link slowed down, until the round that follows ends: each
    // candidate's time as the link model predicts it, so that the round
    // explores only the likely ones, or kTimedOnTheNewLink once the round
    // timed it (0: nothing predicted).
    std::array<double, kMaxCandidates> predicted{};
    int choice = -1;
    ddph_choice_reason_t reason = DDPH_CHOICE_WARMUP;
    double decided_seconds = 0;
    // The reference's (least compressed candidate's) last measured time
    // here, kept through rounds: what timing it again would cost.
    double ref_seconds = 0;
    // This step's candidate and how many steps in a row it ran here.
    int last = -1;
    uint64_t run = 0;
    // The agreed (smallest over the ranks) seconds the backward ran on
    // after this bucket was submitted, and whether the choice is a less
    // compressed candidate than the fastest because that time hides it.
    double ahead = 0;
    bool hidden = false;
  };
  struct Window {  // this rank's, since the last exchange; under mu_
    std::array<std::array<double, kMaxCandidates>, kMaxSlots> sum{};
    std::array<std::array<uint32_t, kMaxCandidates>, kMaxSlots> count{};
    double seconds = 0, norm_sq = 0;
    bool new_slot = false;
    std::array<double, kMaxSlots> ahead_sum{};
    std::array<uint32_t, kMaxSlots> ahead_count{};
    double period_sum = 0;
    uint32_t periods = 0, steps = 0;
  };

  bool allowed(int c) const;
  int least_compressed() const;
  // reference_first: time the least compressed candidate first (a probe).
  void start_round(bool reference_first);
  // After the explored candidate's exchange: the next one not skipped.
  void next_in_round();
  bool skip(int c) const;
  // Candidate c's time in `slot` as far as is known without running it
  // (skip()); 0: not known.
  double estimated_seconds(const Slot& slot, int c) const;
  // Whether this is a round after a slowdown (the link model predicted
  // times in some bucket; a bucket whose time held has none).
  bool after_slowdown() const;
  // What timing the reference in every bucket would cost over the fastest.
  double reference_cost() const;
  void decide(ddph_choice_reason_t reason);
  // What candidate c's time `t` counts for in a decision: a lossy one's
  // has `penalty` added (lossy_penalty()).
  double weighed(int c, double t, double penalty) const;
  // Per slot, what a lossy candidate there must save to run: lossy_margin
  // of the step's time with every bucket on its fastest other candidate,
  // shared out by the buckets' bytes.
  std::vector<double> lossy_penalty() const;
  // The shortest agreed time in `slot` of the candidates allowed now (with
  // not_lossy, of those that are not lossy); 0: none measured.
  double fastest_allowed(const Slot& slot, bool not_lossy) const;
  // The step's time past the backward's end with bucket times `t`.
  double exposed_seconds(const std::vector<double>& t) const;
  void hide_behind_backward();
  void decide_by_model();
  double model_seconds(int c, uint64_t bytes) const;
  void hold_back_if_norm_jumped(double norm);
  void describe();

  AutoSettings settings_;
  std::vector<CandidateInfo> candidates_;
  int world_size_;
  // Everything a checkpoint holds besides the window, so that a load
  // replaces it in one assignment.
  struct State {
    Phase phase = Phase::kWarmup;
    uint64_t begun = 0;  // steps begun
    uint64_t next_exchange = 0, norm_step = 0, held_until = 0;
    bool held = false;        // the last decision held lossy candidates back
    uint64_t last_round = 0;  // the step the last round started
    std::vector<int> round;   // candidates of this round, in order
    size_t round_pos = 0;
    double last_norm = 0;  // the running mean of the checks' norms
    // +1 or -1: the last check's norm moved past norm_jump up or down from
    // the running mean; 0: within it. A second check the same way holds.
    int norm_trend = 0;
    double total_seconds = 0, explore_cost = 0;
    // A step's time outside its buckets' hooks (forward, backward,
    // optimizer): the agreed period less the buckets' seconds per step.
    double rest_seconds = 0;
    std::vector<Slot> slots;
  } st_;
  uint64_t step_ = 0;  // the step begun last
  bool in_step_ = false;
  std::string last_decision_;
  bool changed_ = false;
  mutable std::mutex mu_;
  Window window_;
};

}  // namespace loader
}  // namespace ddph
