// The auto hook's decisions (loader/auto/chooser.h), without communicators:
// synthetic timings in, picks out. Ranks are simulated by choosers whose
// reports are combined element by element with MAX, as the session's
// allreduce does. A bucket's times on the ranks are those of one
// collective: every rank waits inside it for the slowest one's share, and
// a rank that reaches it sooner also waits for the last one to arrive.
#include "loader/auto/chooser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace loader {
namespace {

// The built-in candidates in their default order, with their nominal
// ratios and costs (loader/auto/candidates.cpp).
enum : int { kAllreduce = 0, kFp16 = 1, kBf16 = 2, kQ8 = 3, kQ4ef = 4, kPsgd4 = 5 };

std::vector<CandidateInfo> builtins() {
  return {{"allreduce", 1, 0.05, 1}, {"fp16", 2, 0.3, 1}, {"bf16", 2, 0.3, 1},
          {"q8", 4, 0.8, 1},         {"q4ef", 8, 1.2, 1}, {"powersgd4", 16, 1.5, 2}};
}

AutoSettings settings() {
  AutoSettings s;
  s.warmup_steps = 5;
  s.recheck_steps = 5;
  s.explore_share = 0.5;
  s.norm_jump = 0;  // tests that want it turn it on
  return s;
}

// seconds(rank, step, slot, candidate)
using TimeFn = std::function<double(int, uint64_t, uint32_t, int)>;
// The backward's seconds after a bucket's submission: ahead(rank, step, slot)
using AheadFn = std::function<double(int, uint64_t, uint32_t)>;
// A step's period on a rank from the seconds its buckets took:
// period(rank, hooks)
using PeriodFn = std::function<double(int, double)>;

struct StepPicks {
  std::vector<Pick> picks;
  bool exchanged = false;
};

// Runs `steps` steps of `slots` buckets (sizes `bytes`) on every chooser,
// exchanging as the session does; returns each step's picks of rank 0 and
// checks that every rank picked the same.
std::vector<StepPicks> run(std::vector<Chooser*> ranks, uint64_t steps,
                           const std::vector<uint64_t>& bytes, const TimeFn& seconds,
                           uint64_t first_step = 0,
                           const std::function<double(uint64_t)>& norm = {},
                           const AheadFn& ahead = {}, const PeriodFn& period = {}) {
  std::vector<StepPicks> out;
  for (uint64_t k = first_step; k < first_step + steps; ++k) {
    StepPicks step;
    std::vector<double> hooks(ranks.size(), 0.0);
    bool due = false;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const bool d = ranks[r]->begin_step();
      if (r == 0) due = d;
      EXPECT_EQ(d, due) << "rank " << r << " step " << k;
    }
    if (due) {
      std::vector<double> combined(Chooser::kReportWords, 0.0);
      for (Chooser* c : ranks) {
        const std::vector<double> mine = c->report();
        for (size_t i = 0; i < combined.size(); ++i) combined[i] = std::max(combined[i], mine[i]);
      }
      for (Chooser* c : ranks) c->agreed(combined);
      step.exchanged = true;
    }
    for (uint32_t s = 0; s < bytes.size(); ++s) {
      std::vector<Pick> picks;
      for (Chooser* c : ranks) picks.push_back(c->pick(s, bytes[s]));
      for (size_t r = 1; r < ranks.size(); ++r) {
        EXPECT_EQ(picks[r].candidate, picks[0].candidate) << "rank " << r << " step " << k;
        EXPECT_EQ(picks[r].reason, picks[0].reason) << "rank " << r << " step " << k;
      }
      for (size_t r = 0; r < ranks.size(); ++r) {
        if (ranks[r]->wants_norm() && norm) ranks[r]->add_norm_sq(norm(k) * norm(k));
        const double t = seconds(int(r), k, s, picks[r].candidate);
        ranks[r]->measured(picks[r], s, t);
        hooks[r] += t;
      }
      step.picks.push_back(picks[0]);
    }
    for (size_t r = 0; r < ranks.size(); ++r) {
      std::vector<double> after;
      for (uint32_t s = 0; s < bytes.size() && ahead; ++s) after.push_back(ahead(int(r), k, s));
      ranks[r]->finished_step(after, period ? period(int(r), hooks[r]) : -1);
    }
    out.push_back(step);
  }
  return out;
}

std::vector<StepPicks> run(Chooser& one, uint64_t steps, const std::vector<uint64_t>& bytes,
                           const TimeFn& seconds) {
  return run(std::vector<Chooser*>{&one}, steps, bytes, seconds);
}

// Per-candidate times in ms for one bucket, whatever the rank and step.
TimeFn fixed_ms(std::vector<double> ms) {
  return [ms](int, uint64_t, uint32_t, int c) { return ms[size_t(c)] * 1e-3; };
}

// Per-candidate times in ms on a 10 Gbit/s-like link (fp16 fastest) and on
// a 100 Mbit/s-like one (PowerSGD fastest).
const std::vector<double> kFastLinkMs = {12, 8, 8, 9, 11, 14};
const std::vector<double> kSlowLinkMs = {600, 300, 300, 150, 80, 20};

// A link that changes rate: per-candidate times in ms for one bucket,
// `before` until *changed is set, `after` from then on.
TimeFn link_change_ms(std::vector<double> before, std::vector<double> after,
                      const bool* changed) {
  return [before, after, changed](int, uint64_t, uint32_t, int c) {
    return (*changed ? after : before)[size_t(c)] * 1e-3;
  };
}

// Checks that every bucket of every step ran one of `allowed`; the
// steps are numbered from first_step in the messages.
void expect_only(const std::vector<StepPicks>& steps, const std::vector<int>& allowed,
                 uint64_t first_step) {
  for (size_t k = 0; k < steps.size(); ++k)
    for (const Pick& p : steps[k].picks)
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), p.candidate), allowed.end())
          << "step " << first_step + k << ": candidate " << p.candidate;
}

// Whether any bucket of any step ran candidate c.
bool ran(const std::vector<StepPicks>& steps, int c) {
  for (const StepPicks& s : steps)
    for (const Pick& p : s.picks)
      if (p.candidate == c) return true;
  return false;
}

int count(const std::vector<StepPicks>& steps, ddph_choice_reason_t reason) {
  int n = 0;
  for (const StepPicks& s : steps)
    for (const Pick& p : s.picks) n += p.reason == reason;
  return n;
}

TEST(AutoChooser, WarmsUpOnTheLeastCompressedThenExploresMostCompressedFirstThenPicksTheFastest) {
  Chooser ch(settings(), builtins(), 2);
  // A 1 Gbit/s-like bucket: 8-bit is fastest.
  const auto steps = run(ch, 60, {4 << 20}, fixed_ms({40, 22, 22, 9, 11, 14}));
  for (uint64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(steps[k].picks[0].candidate, kAllreduce) << k;
    EXPECT_EQ(steps[k].picks[0].reason, DDPH_CHOICE_WARMUP) << k;
  }
  // Then the others for explore_steps() each (PowerSGD 4, the others 3:
  // its first step is uncompressed), the most compressed first, lossy
  // ones last (allreduce was timed while warming up). 16-bit is skipped:
  // half of allreduce's 40 ms is over 1.5 x 8-bit's 9 ms.
  const std::vector<int> order = {kQ8, kPsgd4, kQ4ef};
  uint64_t k = 5;
  for (int c : order)
    for (uint64_t i = 0; i < ch.explore_steps(c); ++i, ++k) {
      EXPECT_EQ(steps[k].picks[0].candidate, c) << k;
      EXPECT_EQ(steps[k].picks[0].reason, DDPH_CHOICE_EXPLORE) << k;
    }
  EXPECT_EQ(count(steps, DDPH_CHOICE_EXPLORE), 4 + 3 + 3);
  for (; k < 60; ++k) {
    EXPECT_EQ(steps[k].picks[0].candidate, kQ8) << k;
    EXPECT_EQ(steps[k].picks[0].reason, DDPH_CHOICE_FASTEST) << k;
  }
  EXPECT_NE(ch.last_decision().find("q8"), std::string::npos) << ch.last_decision();
}

TEST(AutoChooser, OnASlowLinkSkipsCandidatesWhoseScaledTimeCannotWin) {
  Chooser ch(settings(), builtins(), 2);
  // 100 Mbit/s-like: allreduce 600 ms, PowerSGD 20 ms. 8-bit is timed
  // (what runs when lossy candidates are held back: 150 ms, against
  // allreduce's 600), and 16-bit, scaled to 300 ms against its 150, is
  // skipped. Scaled from allreduce by wire bytes, 4-bit would take 75 ms,
  // over 1.5 x PowerSGD's 20: skipped.
  const auto steps = run(ch, 30, {4 << 20}, fixed_ms(kSlowLinkMs));
  EXPECT_EQ(count(steps, DDPH_CHOICE_EXPLORE), 3 + 4);
  EXPECT_EQ(steps[5].picks[0].candidate, kQ8);
  EXPECT_EQ(steps[5 + 3].picks[0].candidate, kPsgd4);
  EXPECT_EQ(steps[29].picks[0].candidate, kPsgd4);
  EXPECT_EQ(steps[29].picks[0].reason, DDPH_CHOICE_FASTEST);
}

TEST(AutoChooser, LossyCandidatesAreTimedOnlyWhereTheOthersLeaveThemAChance) {
  Chooser ch(settings(), builtins(), 2);
  // A compute-bound step: 30 ms outside the hooks. lossy_margin of the
  // step with 8-bit (0.25 x 36 ms) is over 8-bit's whole 6 ms: PowerSGD
  // and 4-bit could not win even taking no time, and are never run.
  // (Against allreduce's 12 ms, timed in the warm-up, they could have.)
  const auto steps = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, fixed_ms({12, 9, 9, 6, 5, 4}),
                         0, {}, {}, [](int, double hooks) { return hooks + 0.030; });
  for (size_t k = 0; k < steps.size(); ++k) {
    const int c = steps[k].picks[0].candidate;
    EXPECT_TRUE(c != kPsgd4 && c != kQ4ef) << "step " << k << ": " << c;
  }
  EXPECT_EQ(steps.back().picks[0].candidate, kQ8);
}

TEST(AutoChooser, NearTiesGoToTheLessCompressedCandidate) {
  Chooser ch(settings(), builtins(), 2);
  // 4-bit is 3% faster than fp16: within kPreferLessCompressed, fp16 wins.
  const auto steps = run(ch, 40, {1 << 20}, fixed_ms({18, 10, 12, 11, 9.7, 20}));
  EXPECT_EQ(steps[39].picks[0].candidate, kFp16);
}

TEST(AutoChooser, EveryRankTakesTheSameDecisionWhenTheyMeasureDifferently) {
  AutoSettings s = settings();
  s.drift = 0.3;
  s.lossy_margin = 0;  // the fastest runs
  Chooser r0(s, builtins(), 3), r1(s, builtins(), 3), r2(s, builtins(), 3);
  // Each rank sees other times: rank 2 is slow on 8-bit, which every rank
  // waits for inside the collective, and rank 1 reaches each bucket late
  // by 0-8 ms, which ranks 0 and 2 wait for. The link slows down at step
  // 70: the picks are compared step by step.
  const TimeFn seconds = [](int rank, uint64_t step, uint32_t slot, int c) {
    const double base[] = {40, 22, 22, 9, 11, 14};
    double t = base[c] * (1 + 0.1 * slot);
    if (c == kQ8) t *= 2;
    if (step >= 70 && c != kPsgd4) t *= 10;
    if (rank != 1) t += 8 * double((step * 7 + size_t(c)) % 5) / 4;
    return t * 1e-3;
  };
  const auto steps = run({&r0, &r1, &r2}, 140, {1 << 22, 1 << 20, 1 << 16}, seconds);
  // The agreed view is the collective's own time: 8-bit takes 18 ms, so
  // 4-bit wins before the link slows down, PowerSGD after it.
  EXPECT_EQ(steps[60].picks[0].candidate, kQ4ef);
  EXPECT_EQ(steps[139].picks[0].candidate, kPsgd4);
  EXPECT_EQ(steps[139].picks[2].candidate, kPsgd4);
}

TEST(AutoChooser, WaitingForALateRankIsNotChargedToTheCandidate) {
  // fp16 is fastest (12 ms against bf16's 14 and allreduce's 20), but
  // whenever it runs rank 0 reaches the bucket 15 ms before rank 1 and
  // waits for it inside the collective. Rank 1's time is fp16's own: it
  // runs, on both ranks. (Taken at the slower rank, 27 ms, bf16 would.)
  const TimeFn seconds = [](int rank, uint64_t, uint32_t, int c) {
    const double base[] = {20, 12, 14, 30, 30, 30};
    return (base[c] + (rank == 0 && c == kFp16 ? 15 : 0)) * 1e-3;
  };
  Chooser r0(settings(), builtins(), 2), r1(settings(), builtins(), 2);
  const auto steps = run({&r0, &r1}, 60, {1 << 20}, seconds);
  EXPECT_EQ(steps[59].picks[0].candidate, kFp16);
  EXPECT_EQ(steps[59].picks[0].reason, DDPH_CHOICE_FASTEST);
  EXPECT_NE(r0.last_decision().find("fp16 12 ms"), std::string::npos) << r0.last_decision();
}

TEST(AutoChooser, ALinkThatSlowsDownMakesItExploreAgainAndSwitch) {
  Chooser ch(settings(), builtins(), 2);
  bool slow = false;
  const TimeFn seconds = link_change_ms(kFastLinkMs, kSlowLinkMs, &slow);
  const auto before = run(std::vector<Chooser*>{&ch}, 50, {4 << 20}, seconds, 0);
  EXPECT_EQ(before.back().picks[0].candidate, kFp16);
  slow = true;
  const auto after = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, seconds, 50);
  EXPECT_GT(count(after, DDPH_CHOICE_EXPLORE), 0);
  EXPECT_EQ(after.back().picks[0].candidate, kPsgd4);
  EXPECT_EQ(after.back().picks[0].reason, DDPH_CHOICE_FASTEST);
  // A drift is seen at the first exchange after the change, within
  // recheck_steps, and the new round starts there.
  int first_explore = -1;
  for (size_t i = 0; i < after.size() && first_explore < 0; ++i)
    if (after[i].picks[0].reason == DDPH_CHOICE_EXPLORE) first_explore = int(i);
  EXPECT_GE(first_explore, 0);
  EXPECT_LE(first_explore, 5);
}

TEST(AutoChooser, ALinkThatGetsFasterIsFoundByAProbeAndSwitchedTo) {
  Chooser ch(settings(), builtins(), 2);
  bool fast = false;
  // Back to 10 Gbit/s-like, where 8-bit is fastest; PowerSGD barely changes.
  const TimeFn seconds = link_change_ms(kSlowLinkMs, {12, 8, 8, 6, 11, 14}, &fast);
  const auto before = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, seconds, 0);
  EXPECT_EQ(before.back().picks[0].candidate, kPsgd4);
  fast = true;
  // 180 steps: up to the next probe, 100 steps after this one's round.
  const auto after = run(std::vector<Chooser*>{&ch}, 180, {4 << 20}, seconds, 60);
  // PowerSGD's 30% change is no drift; the probe comes within
  // kProbeRechecks exchanges of the last round, timing allreduce first.
  int first_explore = -1;
  for (size_t i = 0; i < after.size() && first_explore < 0; ++i)
    if (after[i].picks[0].reason == DDPH_CHOICE_EXPLORE) first_explore = int(i);
  ASSERT_GE(first_explore, 0);
  EXPECT_LE(first_explore, int(Chooser::kProbeRechecks * 5));
  EXPECT_EQ(after[size_t(first_explore)].picks[0].candidate, kAllreduce);
  EXPECT_EQ(after.back().picks[0].candidate, kQ8);
}

TEST(AutoChooser, NoProbeTimesTheReferenceWhereThatWouldCostMoreThanItsShare) {
  AutoSettings s = settings();
  s.explore_share = 0.03;
  Chooser ch(s, builtins(), 2);
  // 100 Mbit/s-like all along: timing allreduce again (600 ms against
  // PowerSGD's 20, for 4 steps) would cost 2.3 s, over 3% of the run's
  // bucket time for the next hundreds of steps.
  const auto steps = run(ch, 300, {4 << 20}, fixed_ms(kSlowLinkMs));
  for (size_t k = 20; k < steps.size(); ++k) {
    EXPECT_EQ(steps[k].picks[0].candidate, kPsgd4) << k;
    EXPECT_EQ(steps[k].picks[0].reason, DDPH_CHOICE_FASTEST) << k;
  }
}

TEST(AutoChooser, AfterASlowdownNoProbeIsPricedAtTheFastLinksTime) {
  AutoSettings s = settings();
  s.explore_share = 0.2;
  Chooser ch(s, builtins(), 2);
  bool slow = false;
  const TimeFn seconds = link_change_ms(kFastLinkMs, kSlowLinkMs, &slow);
  run(std::vector<Chooser*>{&ch}, 50, {4 << 20}, seconds, 0);
  slow = true;
  // Allreduce was last timed at 12 ms, under PowerSGD's 20 ms now: priced
  // at that, a probe would look free, fit the share by step 300 and time
  // it at 600 ms a step. 8-bit's 150 ms on the new link, at a quarter of
  // allreduce's bytes, prices it at 600 ms: within 400 steps it never fits.
  const auto after = run(std::vector<Chooser*>{&ch}, 400, {4 << 20}, seconds, 50);
  for (size_t k = 0; k < after.size(); ++k)
    EXPECT_NE(after[k].picks[0].candidate, kAllreduce) << "step " << 50 + k;
  EXPECT_EQ(after.back().picks[0].candidate, kPsgd4);
}

TEST(AutoChooser, ASlowdownOnALossyCandidateTimesOnlyTheOthersThatCanWin) {
  Chooser ch(settings(), builtins(), 2);
  bool slow = false;
  // PowerSGD fastest on the fast link, by lossy_margin.
  const TimeFn seconds = link_change_ms({12, 8, 8, 9, 11, 4}, kSlowLinkMs, &slow);
  const auto before = run(std::vector<Chooser*>{&ch}, 50, {4 << 20}, seconds, 0);
  ASSERT_EQ(before.back().picks[0].candidate, kPsgd4);
  slow = true;
  // PowerSGD's slowdown (4 to 20 ms) predicts 8-bit at 73 ms and 16-bit
  // at 136: the link model counts only what PowerSGD's few bytes showed.
  // 8-bit, the best guess of what runs while lossy candidates are held
  // back, is timed (150 ms); its time beyond the prediction is the
  // link's, which puts 16-bit past 1.5 x 150 ms and allreduce at 576 ms:
  // neither is timed on the slow link.
  const auto after = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, seconds, 50);
  expect_only(after, {kPsgd4, kQ8, kQ4ef}, 50);
  EXPECT_TRUE(ran(after, kQ8));
  EXPECT_EQ(after.back().picks[0].candidate, kPsgd4);
  EXPECT_EQ(after.back().picks[0].reason, DDPH_CHOICE_FASTEST);
}

TEST(AutoChooser, ASecondSlowdownPricesTheCandidatesTheFirstLeftUntimed) {
  Chooser ch(settings(), builtins(), 2);
  int link = 0;
  const TimeFn seconds = [&](int, uint64_t, uint32_t, int c) {
    const double ms[3][6] = {{12, 8, 8, 9, 11, 4},           // PowerSGD, by lossy_margin
                             {120, 60, 60, 32, 20, 9},       // 1 Gbit/s-like
                             {600, 300, 300, 150, 80, 20}};  // 100 Mbit/s-like
    return ms[link][c] * 1e-3;
  };
  run(std::vector<Chooser*>{&ch}, 50, {4 << 20}, seconds, 0);
  link = 1;
  // The first slowdown times 8-bit only: 16-bit and allreduce, predicted
  // far above it, are not timed on this link, and nothing of them is
  // known after it.
  const auto middle = run(std::vector<Chooser*>{&ch}, 50, {4 << 20}, seconds, 50);
  ASSERT_EQ(middle.back().picks[0].candidate, kPsgd4);
  link = 2;
  // After the second, 16-bit and allreduce are priced by bytes on the
  // wire from 8-bit's time on the new link (300 and 600 ms against its
  // 150): not timed either.
  const auto after = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, seconds, 100);
  expect_only(middle, {kPsgd4, kQ8, kQ4ef}, 50);
  expect_only(after, {kPsgd4, kQ8, kQ4ef}, 100);
  EXPECT_EQ(after.back().picks[0].candidate, kPsgd4);
}

TEST(AutoChooser, ABucketWhoseTimeHeldThroughASlowdownIsPricedToo) {
  Chooser ch(settings(), builtins(), 2);
  int link = 0;
  const double ms[3][6] = {{12, 8, 8, 9, 11, 4},           // PowerSGD, by lossy_margin
                           {120, 60, 60, 32, 20, 9},       // 1 Gbit/s-like
                           {600, 300, 300, 150, 80, 20}};  // 100 Mbit/s-like
  // The second bucket's times move with the first's slowdown, but not
  // with the second: it keeps what the first slowdown's round timed of it
  // (8-bit and PowerSGD), and nothing of the others.
  const TimeFn seconds = [&](int, uint64_t, uint32_t slot, int c) {
    return ms[slot == 1 && link == 2 ? 1 : link][c] * 1e-3;
  };
  run(std::vector<Chooser*>{&ch}, 50, {4 << 20, 4 << 20}, seconds, 0);
  link = 1;
  const auto middle = run(std::vector<Chooser*>{&ch}, 50, {4 << 20, 4 << 20}, seconds, 50);
  link = 2;
  const auto after = run(std::vector<Chooser*>{&ch}, 60, {4 << 20, 4 << 20}, seconds, 100);
  expect_only(middle, {kPsgd4, kQ8, kQ4ef}, 50);
  expect_only(after, {kPsgd4, kQ8, kQ4ef}, 100);
  EXPECT_EQ(after.back().picks[0].candidate, kPsgd4);
}

TEST(AutoChooser, TheChoiceASlowdownWasSeenOnIsNotKeptAtItsTimeBeforeTheChange) {
  // fp16 runs on the fast link. The check that sees the slowdown averages
  // steps from before it: fp16's 300 ms on the new link looks like 66 to
  // 242 ms. 8-bit, timed in the round at 150 ms, more than its predicted
  // time, shows what the link model missed, and fp16's time rises with it:
  // 8-bit runs, not fp16 at the time its last check understated.
  for (uint64_t change = 50; change < 55; ++change) {
    AutoSettings s = settings();
    s.max_compression = 4;  // allreduce, 16-bit and 8-bit only
    Chooser ch(s, builtins(), 2);
    const TimeFn seconds = [&](int, uint64_t step, uint32_t, int c) {
      return (step >= change ? kSlowLinkMs : kFastLinkMs)[size_t(c)] * 1e-3;
    };
    const auto before = run(std::vector<Chooser*>{&ch}, change, {4 << 20}, seconds, 0);
    ASSERT_EQ(before.back().picks[0].candidate, kFp16);
    const auto after = run(std::vector<Chooser*>{&ch}, 40, {4 << 20}, seconds, change);
    bool explored = false;
    for (size_t k = 0; k < after.size(); ++k) {
      const Pick& p = after[k].picks[0];
      explored = explored || p.reason == DDPH_CHOICE_EXPLORE;
      if (explored && p.reason == DDPH_CHOICE_FASTEST) {
        EXPECT_EQ(p.candidate, kQ8) << "slowdown at step " << change << ", step " << change + k;
      }
    }
    EXPECT_TRUE(explored) << "slowdown at step " << change;
  }
}

TEST(AutoChooser, PowerSGDsNominalRatioDoesNotPriceTheOthersAfterASlowdown) {
  Chooser ch(settings(), builtins(), 2);
  bool jumped = false;
  // 100 Mbit/s-like, where PowerSGD sends far less than 1/16 of the
  // bucket: 3 ms. Its time then doubles (noise on a few milliseconds, or
  // a slower link): a round after a slowdown. Scaled from PowerSGD by its
  // nominal ratio, 16-bit would take 56 ms and be timed at 300; 8-bit's
  // prediction (166 ms) and allreduce's (664) price it at 332.
  const TimeFn seconds = [&](int, uint64_t, uint32_t, int c) {
    const double ms[] = {600, 300, 300, 150, 80, jumped ? 7.0 : 3.0};
    return ms[c] * 1e-3;
  };
  const auto before = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, seconds, 0);
  ASSERT_EQ(before.back().picks[0].candidate, kPsgd4);
  jumped = true;
  const auto after = run(std::vector<Chooser*>{&ch}, 60, {4 << 20}, seconds, 60);
  expect_only(after, {kPsgd4, kQ8}, 60);
  EXPECT_GT(count(after, DDPH_CHOICE_EXPLORE), 0);
  EXPECT_EQ(after.back().picks[0].candidate, kPsgd4);
}

TEST(AutoChooser, ExploringAgainStaysWithinItsShareOfTheRunsTime) {
  AutoSettings s = settings();
  s.explore_share = 0;  // nothing may be spent on exploring again
  Chooser ch(s, builtins(), 2);
  bool slow = false;
  const TimeFn seconds = link_change_ms(kFastLinkMs, kSlowLinkMs, &slow);
  run(std::vector<Chooser*>{&ch}, 50, {4 << 20}, seconds, 0);
  slow = true;
  const auto after = run(std::vector<Chooser*>{&ch}, 40, {4 << 20}, seconds, 50);
  EXPECT_EQ(count(after, DDPH_CHOICE_EXPLORE), 0);
  EXPECT_EQ(after.back().picks[0].candidate, kFp16);  // stays: no budget
  EXPECT_GT(ch.exploration_seconds(), 0);
}

TEST(AutoChooser, AGradientNormJumpHoldsLossyCandidatesBackForHoldSteps) {
  AutoSettings s = settings();
  s.norm_jump = 1;
  s.hold_steps = 20;
  Chooser ch(s, builtins(), 2);
  // 4-bit is fastest (by more than lossy_margin). The norm of one checked
  // step (29) triples: an outlier, not held for. From step 60 it is 4
  // times what it was: past 1 + norm_jump times the running mean at two
  // checks in a row (4x, then 2.1x; the next checks' are under it).
  const auto steps =
      run(std::vector<Chooser*>{&ch}, 120, {1 << 20}, fixed_ms({16, 10, 11, 15, 7, 14}), 0,
          [](uint64_t k) { return k == 29 ? 3.0 : k < 60 ? 1.0 : 4.0; });
  EXPECT_EQ(steps[55].picks[0].candidate, kQ4ef);
  int held = 0;
  for (const StepPicks& st : steps) {
    const Pick& p = st.picks[0];
    if (p.reason != DDPH_CHOICE_CRITICAL) continue;
    ++held;
    // The fastest of those up to 8-bit (8-bit, 15 ms, is slower than fp16).
    EXPECT_EQ(p.candidate, kFp16);
  }
  // Seen at the second exchange after step 60 (every 5 steps), held for
  // 20 steps; nothing held before.
  EXPECT_GE(held, 16);
  EXPECT_LE(held, 20);
  for (size_t k = 0; k < 65; ++k) EXPECT_NE(steps[k].picks[0].reason, DDPH_CHOICE_CRITICAL) << k;
  EXPECT_EQ(steps[95].picks[0].candidate, kQ4ef);
  EXPECT_EQ(steps[95].picks[0].reason, DDPH_CHOICE_FASTEST);
}

TEST(AutoChooser, ALossyCandidateRunsOnlyWhenFasterByLossyMargin) {
  // PowerSGD 8% faster than 8-bit (the CNN at 1 Gbit/s): 8-bit runs, it
  // converges more per step. 7.5 times faster (100 Mbit/s): PowerSGD.
  Chooser close(settings(), builtins(), 4);
  EXPECT_EQ(run(close, 60, {4 << 20}, fixed_ms({60, 40, 40, 30.5, 33, 28}))[59].picks[0].candidate,
            kQ8);
  Chooser far(settings(), builtins(), 4);
  EXPECT_EQ(run(far, 60, {4 << 20}, fixed_ms(kSlowLinkMs))[59].picks[0].candidate, kPsgd4);
  // lossy_margin 0: the fastest runs.
  AutoSettings s = settings();
  s.lossy_margin = 0;
  Chooser fastest(s, builtins(), 4);
  EXPECT_EQ(
      run(fastest, 60, {4 << 20}, fixed_ms({60, 40, 40, 30.5, 33, 28}))[59].picks[0].candidate,
      kPsgd4);
}

TEST(AutoChooser, ALossyCandidateMustSaveLossyMarginOfTheWholeStep) {
  // PowerSGD's bucket takes 2 ms against 8-bit's 6. With nothing else in
  // the step it saves 4 of 6 ms: it runs. With 100 ms of forward and
  // backward around the bucket it saves 4 of 106 ms, under lossy_margin's
  // 25%: 8-bit runs, as its better convergence per step is worth more.
  const TimeFn seconds = fixed_ms({10, 8, 8, 6, 3, 2});
  Chooser comm_bound(settings(), builtins(), 2);
  const auto fast = run(std::vector<Chooser*>{&comm_bound}, 60, {4 << 20}, seconds, 0, {}, {},
                        [](int, double hooks) { return hooks; });
  EXPECT_EQ(fast[59].picks[0].candidate, kPsgd4);
  Chooser compute_bound(settings(), builtins(), 2);
  const auto slow = run(std::vector<Chooser*>{&compute_bound}, 60, {4 << 20}, seconds, 0, {}, {},
                        [](int, double hooks) { return 0.1 + hooks; });
  EXPECT_EQ(slow[59].picks[0].candidate, kQ8);
  // Not even explored there: 25 ms of the step is more than allreduce's
  // 10, so a lossy candidate could not win at no time at all.
  for (const StepPicks& st : slow) {
    EXPECT_NE(st.picks[0].candidate, kPsgd4);
    EXPECT_NE(st.picks[0].candidate, kQ4ef);
  }
  // The rest of the step is the slowest rank's period less the hooks'
  // seconds: one rank with 100 ms of compute holds both back.
  Chooser a(settings(), builtins(), 2), b(settings(), builtins(), 2);
  const auto two = run({&a, &b}, 60, {4 << 20}, seconds, 0, {}, {},
                       [](int rank, double hooks) { return (rank == 1 ? 0.1 : 0) + hooks; });
  EXPECT_EQ(two[59].picks[0].candidate, kQ8);
}

TEST(AutoChooser, ADriftTooSmallForTheStepStartsNoRound) {
  // 8-bit's bucket takes 2 ms, then 5, then 2 (by windows of the checks):
  // over the factor 1 + drift each time. In a 100 ms step that is 3% of
  // it and nothing is explored again; with nothing else in the step it is
  // most of it and each change starts a round.
  const TimeFn seconds = [](int, uint64_t step, uint32_t, int c) {
    const double ms[] = {10, 8, 8, (step / 10) % 2 ? 5.0 : 2.0, 30, 30};
    return ms[c] * 1e-3;
  };
  auto explored_after = [](const std::vector<StepPicks>& steps, uint64_t from) {
    int n = 0;
    for (uint64_t k = from; k < steps.size(); ++k)
      n += steps[k].picks[0].reason == DDPH_CHOICE_EXPLORE;
    return n;
  };
  Chooser compute_bound(settings(), builtins(), 2);
  const auto calm = run(std::vector<Chooser*>{&compute_bound}, 100, {4 << 20}, seconds, 0, {}, {},
                        [](int, double hooks) { return 0.1 + hooks; });
  EXPECT_EQ(explored_after(calm, 30), 0);
  EXPECT_EQ(calm[99].picks[0].candidate, kQ8);
  Chooser comm_bound(settings(), builtins(), 2);
  const auto busy = run(std::vector<Chooser*>{&comm_bound}, 100, {4 << 20}, seconds, 0, {}, {},
                        [](int, double hooks) { return hooks; });
  EXPECT_GT(explored_after(busy, 30), 0);
}

TEST(AutoChooser, MaxCompressionKeepsMoreCompressedCandidatesOut) {
  AutoSettings s = settings();
  s.max_compression = 4;
  Chooser ch(s, builtins(), 2);
  const auto steps = run(ch, 60, {4 << 20}, fixed_ms(kSlowLinkMs));
  for (const StepPicks& st : steps) {
    EXPECT_NE(st.picks[0].candidate, kQ4ef);
    EXPECT_NE(st.picks[0].candidate, kPsgd4);
  }
  EXPECT_EQ(steps.back().picks[0].candidate, kQ8);
}

// The model's time of a candidate, from the formula docs/auto.md states.
double model_ms(const CandidateInfo& c, double bytes, double mbit, int world) {
  const double wire_bits = 8 * bytes / c.nominal_ratio * 2 * (world - 1) / world;
  return (wire_bits / (mbit * 1e6) + bytes * c.cpu_ns_per_byte * 1e-9) * 1e3;
}

// What it counts for in a decision (docs/auto.md): a lossy candidate's
// time plus lossy_margin times the fastest other candidate's.
std::vector<double> weighed_model_ms(const std::vector<CandidateInfo>& c, double bytes, double mbit,
                                     int world, double lossy_margin) {
  double other = 0;
  for (const CandidateInfo& x : c)
    if (x.nominal_ratio <= 4 && (other == 0 || model_ms(x, bytes, mbit, world) < other))
      other = model_ms(x, bytes, mbit, world);
  std::vector<double> out;
  for (const CandidateInfo& x : c)
    out.push_back(model_ms(x, bytes, mbit, world) +
                  (x.nominal_ratio > 4 ? lossy_margin * other : 0));
  return out;
}

TEST(AutoChooser, DeterministicModeDecidesFromTheStatedLinkAloneAndNeverExplores) {
  for (const double mbit : {100.0, 1000.0, 10000.0}) {
    AutoSettings s = settings();
    s.deterministic = true;
    s.link_mbit = mbit;
    Chooser a(s, builtins(), 4), b(s, builtins(), 4);
    const double bytes = 7.5e6;
    int expected = 0;
    const std::vector<CandidateInfo> c = builtins();
    const std::vector<double> ms = weighed_model_ms(c, bytes, mbit, 4, s.lossy_margin);
    for (int i = 1; i < int(c.size()); ++i)
      if (ms[size_t(i)] < ms[size_t(expected)]) expected = i;
    // Different timings on the two: the same picks, from the model.
    const auto pa = run(a, 30, {uint64_t(bytes)}, fixed_ms({1, 2, 3, 4, 5, 6}));
    const auto pb = run(b, 30, {uint64_t(bytes)}, fixed_ms({6, 5, 4, 3, 2, 1}));
    EXPECT_EQ(count(pa, DDPH_CHOICE_EXPLORE), 0);
    for (size_t k = 5; k < 30; ++k) {
      EXPECT_EQ(pa[k].picks[0].candidate, expected) << mbit << " Mbit/s, step " << k;
      EXPECT_EQ(pb[k].picks[0].candidate, expected) << mbit << " Mbit/s, step " << k;
      EXPECT_EQ(pa[k].picks[0].reason, DDPH_CHOICE_MODEL);
    }
    // 100 Mbit/s: PowerSGD; 10 Gbit/s: 16-bit (the formula, at 7.5 MB).
    if (mbit == 100) {
      EXPECT_EQ(expected, kPsgd4);
    }
    if (mbit == 10000) {
      EXPECT_EQ(expected, kFp16);
    }
  }
}

TEST(AutoChooser, ABucketOfANewSizeIsExploredAgain) {
  Chooser ch(settings(), builtins(), 2);
  run(ch, 50, {4 << 20}, fixed_ms({40, 22, 22, 9, 11, 14}));
  // DDP rebuilt its buckets: two buckets of other sizes.
  const auto after = run(std::vector<Chooser*>{&ch}, 40, {3 << 20, 1 << 20},
                         fixed_ms({40, 22, 22, 9, 11, 14}), 50);
  EXPECT_GT(count(after, DDPH_CHOICE_EXPLORE), 0);
  EXPECT_EQ(after.back().picks[1].candidate, kQ8);
  EXPECT_EQ(after.back().picks[1].reason, DDPH_CHOICE_FASTEST);
}

TEST(AutoChooser, ACheckpointRestoresEveryDecisionToCome) {
  AutoSettings s = settings();
  s.norm_jump = 0.5;
  const TimeFn seconds = [](int, uint64_t step, uint32_t slot, int c) {
    const double base[] = {40, 22, 22, 9, 11, 14};
    return base[c] * (1 + 0.3 * slot) * (step >= 40 ? 5 : 1) * 1e-3;
  };
  // 45 ms of backward after bucket 0 hides its allreduce until the link
  // slows down at step 40: the restored chooser must know it too.
  const AheadFn ahead = [](int, uint64_t, uint32_t slot) { return slot == 0 ? 45e-3 : 0.0; };
  const std::vector<uint64_t> bytes = {1 << 20, 1 << 18};
  int hidden = 0;
  for (const uint64_t cut : {3u, 8u, 27u, 45u}) {
    Chooser original(s, builtins(), 2);
    run(std::vector<Chooser*>{&original}, cut, bytes, seconds, 0, {}, ahead);
    const std::string blob = original.save();
    Chooser restored(s, builtins(), 2);
    ASSERT_TRUE(restored.load(blob.data(), blob.size()));
    const auto a = run(std::vector<Chooser*>{&original}, 60, bytes, seconds, cut, {}, ahead);
    const auto b = run(std::vector<Chooser*>{&restored}, 60, bytes, seconds, cut, {}, ahead);
    for (const StepPicks& step : a)
      hidden +=
          step.picks[0].candidate == kAllreduce && step.picks[0].reason == DDPH_CHOICE_FASTEST;
    for (size_t k = 0; k < a.size(); ++k)
      for (size_t i = 0; i < a[k].picks.size(); ++i) {
        EXPECT_EQ(a[k].picks[i].candidate, b[k].picks[i].candidate) << cut << "+" << k;
        EXPECT_EQ(a[k].picks[i].reason, b[k].picks[i].reason) << cut << "+" << k;
      }
  }
  EXPECT_GT(hidden, 0) << "no step ran a bucket on allreduce hidden by the backward";
}

TEST(AutoChooser, CheckpointsOfEarlierVersionsStillLoad) {
  // Version 2 is version 3 without its last byte (the norm trend); version
  // 1 is version 2 without the slots' backward times and without what
  // version 2 appends: the window's backward times (32 x 12 bytes),
  // periods (16) and the time outside the hooks (8). A chooser with no
  // bucket yet has only the appended parts.
  Chooser fresh(settings(), builtins(), 2);
  const std::string v3 = fresh.save();
  constexpr size_t kMagic = 8, kChecksum = 8, kAppended2 = kMaxSlots * 12 + 16 + 8;
  ASSERT_GT(v3.size(), kMagic + 4 + kAppended2 + 1 + kChecksum);
  auto older = [&](uint8_t version, size_t cut) {
    std::string blob = v3.substr(0, v3.size() - kChecksum - cut);
    blob[kMagic] = char(version);  // the version, little-endian
    LeWriter checksum;
    checksum.put(fnv1a64(blob.data(), blob.size()), 8);
    return blob + checksum.bytes();
  };
  for (const std::string& blob : {older(2, 1), older(1, kAppended2 + 1)}) {
    Chooser loaded(settings(), builtins(), 2);
    ASSERT_TRUE(loaded.load(blob.data(), blob.size()));
    const auto steps = run(loaded, 40, {1 << 20}, fixed_ms({40, 22, 22, 9, 11, 14}));
    EXPECT_EQ(steps[39].picks[0].candidate, kQ8);
  }
  // And a version this build does not know is refused by number.
  std::string v4 = v3;
  v4[kMagic] = 4;
  try {
    fresh.load(v4.data(), v4.size());
    ADD_FAILURE() << "loaded version 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 4"), std::string::npos) << e.what();
  }
}

TEST(AutoChooser, ANormJumpSeenOnceIsStillPendingAfterACheckpoint) {
  // The norm quadruples from step 60: the check at step 64 sees it once,
  // the one at 69 again and holds. Saved between the two, the restored
  // chooser holds at 69 as the original does.
  AutoSettings s = settings();
  s.norm_jump = 1;
  const auto norm = [](uint64_t k) { return k < 60 ? 1.0 : 4.0; };
  const TimeFn seconds = fixed_ms({16, 10, 11, 15, 7, 14});
  Chooser original(s, builtins(), 2);
  run(std::vector<Chooser*>{&original}, 66, {1 << 20}, seconds, 0, norm);
  const std::string blob = original.save();
  Chooser restored(s, builtins(), 2);
  ASSERT_TRUE(restored.load(blob.data(), blob.size()));
  const auto b = run(std::vector<Chooser*>{&restored}, 20, {1 << 20}, seconds, 66, norm);
  EXPECT_EQ(b[4].picks[0].reason, DDPH_CHOICE_CRITICAL);
  EXPECT_EQ(b[4].picks[0].candidate, kFp16);
}

TEST(AutoChooser, ABucketTheBackwardHidesRunsALessCompressedCandidate) {
  // Two buckets, 8-bit fastest for both (11 ms against allreduce's 30).
  // The backward runs on 50 ms after bucket 0 is submitted: allreduce
  // there ends 20 ms before the backward does, and the step still ends
  // 11 ms after it (bucket 1 on 8-bit).
  const TimeFn seconds = fixed_ms({30, 18, 18, 11, 12, 14});
  const AheadFn ahead = [](int, uint64_t, uint32_t slot) { return slot == 0 ? 50e-3 : 0.0; };
  Chooser ch(settings(), builtins(), 2);
  const auto steps = run(std::vector<Chooser*>{&ch}, 60, {4 << 20, 4 << 20}, seconds, 0, {}, ahead);
  EXPECT_EQ(steps[59].picks[0].candidate, kAllreduce);
  EXPECT_EQ(steps[59].picks[0].reason, DDPH_CHOICE_FASTEST);
  EXPECT_EQ(steps[59].picks[1].candidate, kQ8);
  EXPECT_NE(ch.last_decision().find("50 ms of backward after it): allreduce, fastest, less "
                                    "compressed: the backward hides it"),
            std::string::npos)
      << ch.last_decision();
  // Without the backward after it, bucket 0 runs 8-bit too.
  Chooser no_backward(settings(), builtins(), 2);
  const auto plain = run(no_backward, 60, {4 << 20, 4 << 20}, seconds);
  EXPECT_EQ(plain[59].picks[0].candidate, kQ8);
  EXPECT_EQ(no_backward.last_decision().find("hides"), std::string::npos);
}

TEST(AutoChooser, TheBackwardTimeAgreedIsTheShortestOfTheRanks) {
  // Rank 1's backward ends 15 ms after bucket 0: allreduce there (30 ms)
  // would end 15 ms past it and delay bucket 1 by as much, fp16 (18 ms)
  // by 3: 8-bit stays, on both ranks (run() checks they pick alike),
  // though rank 0 alone would hide allreduce.
  const AheadFn ahead = [](int rank, uint64_t, uint32_t slot) {
    return slot == 0 ? (rank == 0 ? 50e-3 : 15e-3) : 0.0;
  };
  Chooser r0(settings(), builtins(), 2), r1(settings(), builtins(), 2);
  const auto steps =
      run({&r0, &r1}, 60, {4 << 20, 4 << 20}, fixed_ms({30, 18, 18, 11, 12, 14}), 0, {}, ahead);
  EXPECT_EQ(steps[59].picks[0].candidate, kQ8);
  // With 25 ms on both, fp16 ends within it and allreduce does not.
  const AheadFn both = [](int, uint64_t, uint32_t slot) { return slot == 0 ? 25e-3 : 0.0; };
  Chooser a(settings(), builtins(), 2), b(settings(), builtins(), 2);
  const auto fp16 =
      run({&a, &b}, 60, {4 << 20, 4 << 20}, fixed_ms({30, 18, 18, 11, 12, 14}), 0, {}, both);
  EXPECT_EQ(fp16[59].picks[0].candidate, kFp16);
  EXPECT_EQ(fp16[59].picks[1].candidate, kQ8);
}

TEST(AutoChooser, ACheckpointOfAnotherWorldSizeIsNotLoaded) {
  Chooser four(settings(), builtins(), 4);
  run(four, 30, {1 << 20}, fixed_ms({40, 22, 22, 9, 11, 14}));
  const std::string blob = four.save();
  Chooser two(settings(), builtins(), 2);
  EXPECT_FALSE(two.load(blob.data(), blob.size()));
  // It starts fresh: warm-up on allreduce.
  two.begin_step();
  EXPECT_EQ(two.pick(0, 1 << 20).reason, DDPH_CHOICE_WARMUP);
}

TEST(AutoChooser, ACheckpointOfOtherCandidatesOrACorruptOneIsRefused) {
  Chooser six(settings(), builtins(), 2);
  run(six, 20, {1 << 20}, fixed_ms({40, 22, 22, 9, 11, 14}));
  const std::string blob = six.save();
  std::vector<CandidateInfo> two = {builtins()[0], builtins()[4]};
  Chooser other(settings(), two, 2);
  try {
    other.load(blob.data(), blob.size());
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce,fp16,bf16,q8,q4ef,powersgd4"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'allreduce,q4ef'"), std::string::npos) << e.what();
  }
  size_t refused = 0;
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string bad = blob;
    bad[i] = char(bad[i] ^ 0x20);
    Chooser fresh(settings(), builtins(), 2);
    try {
      fresh.load(bad.data(), bad.size());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
      ++refused;
    }
  }
  EXPECT_EQ(refused, blob.size());
}

}  // namespace
}  // namespace loader
}  // namespace ddph
