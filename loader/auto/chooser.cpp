#include "loader/auto/chooser.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace loader {
namespace {

constexpr char kStateMagic[8] = {'D', 'D', 'P', 'H', 'A', 'U', 'T', 'O'};
// Version 2 added each bucket's backward time after it (Slot::ahead,
// Slot::hidden), the window's backward times, periods and steps, and the
// step's time outside the hooks; a version 1 blob loads with none of them
// (measured again from the next exchange). Version 3 appended the
// direction of the last check's norm jump (State::norm_trend).
constexpr uint32_t kOldestStateVersion = 1, kStateVersion = 3;

// The exchange combines the ranks' reports by MAX. A time the ranks agree
// on by its smallest travels as 1 / (1 + seconds), largest for the
// smallest time; a word of 0 (a rank that measured nothing) loses to
// every measured one.
double smallest_wins(double seconds) {
  return 1 / (1 + std::max(0.0, seconds));
}
double from_smallest_wins(double word) {
  return word > 0 ? 1 / word - 1 : 0;
}

}  // namespace

std::string choice_reason_name(int32_t reason) {
  static const char* const kNames[] = {"fixed",   "warmup",   "explore",
                                       "fastest", "critical", "model"};
  if (reason >= 0 && reason < int32_t(sizeof kNames / sizeof kNames[0])) return kNames[reason];
  return "reason " + std::to_string(reason);
}

Chooser::Chooser(const AutoSettings& settings, std::vector<CandidateInfo> candidates,
                 int world_size)
    : settings_(settings), candidates_(std::move(candidates)), world_size_(world_size) {
  st_.next_exchange = uint64_t(settings_.warmup_steps);
  st_.norm_step = st_.next_exchange - 1;  // wraps for no warm-up: no norm before step 0
}

bool Chooser::allowed(int c) const {
  const CandidateInfo& info = candidates_[size_t(c)];
  if (info.nominal_ratio > settings_.max_compression) return false;
  const bool held = step_ < st_.held_until || st_.phase == Phase::kWarmup;
  return !(held && info.lossy());
}

int Chooser::least_compressed() const {
  int best = -1;
  for (int c = 0; c < int(candidates_.size()); ++c) {
    if (candidates_[size_t(c)].nominal_ratio > settings_.max_compression) continue;
    if (best < 0 || candidates_[size_t(c)].nominal_ratio < candidates_[size_t(best)].nominal_ratio)
      best = c;
  }
  return best < 0 ? 0 : best;  // max_compression below every candidate: the first
}

bool Chooser::begin_step() {
  step_ = st_.begun++;
  in_step_ = true;
  const bool due = step_ == st_.next_exchange;
  // The window counts the steps whose buckets it times: an exchange's own
  // step runs after it, in the next window (agreed()).
  std::lock_guard<std::mutex> lock(mu_);
  if (!due) ++window_.steps;
  return due;
}

Pick Chooser::pick(uint32_t slot_index, uint64_t bytes) {
  const size_t s = std::min<size_t>(slot_index, kMaxSlots - 1);
  if (st_.slots.size() <= s) st_.slots.resize(s + 1);
  Slot& slot = st_.slots[s];
  // A bucket of a new size here (DDP rebuilds its buckets after the first
  // step): what was measured for the old one no longer holds. The last
  // slot holds every later bucket and keeps the first size it saw.
  if (slot.bytes != bytes && (s + 1 < kMaxSlots || slot.bytes == 0)) {
    const bool had = slot.bytes != 0;
    slot = Slot{};
    slot.bytes = bytes;
    if (had || st_.phase == Phase::kExploit) {
      std::lock_guard<std::mutex> lock(mu_);
      window_.new_slot = true;
    }
  }
  Pick p;
  p.step = step_;
  if (st_.phase == Phase::kWarmup) {
    p.candidate = least_compressed();
    p.reason = DDPH_CHOICE_WARMUP;
  } else if (settings_.deterministic) {
    int best = -1;
    // The model knows no time outside the hooks: a lossy candidate must
    // save lossy_margin of the fastest other's time for this bucket.
    double other = 0;
    for (int c = 0; c < int(candidates_.size()); ++c)
      if (allowed(c) && !candidates_[size_t(c)].lossy() &&
          (other == 0 || model_seconds(c, bytes) < other))
        other = model_seconds(c, bytes);
    const double penalty = settings_.lossy_margin * other;
    for (int c = 0; c < int(candidates_.size()); ++c) {
      if (!allowed(c)) continue;
      if (best < 0 || weighed(c, model_seconds(c, bytes), penalty) <
                          weighed(best, model_seconds(best, bytes), penalty))
        best = c;
    }
    p.candidate = best < 0 ? least_compressed() : best;
    p.reason = step_ < st_.held_until ? DDPH_CHOICE_CRITICAL : DDPH_CHOICE_MODEL;
  } else if (st_.phase == Phase::kExplore) {
    p.candidate = st_.round[st_.round_pos];
    p.reason = DDPH_CHOICE_EXPLORE;
  } else if (slot.choice >= 0) {
    p.candidate = slot.choice;
    p.reason = slot.reason;
  } else {
    // A bucket not measured yet (a new one): the first bucket's choice
    // until the next round measures it.
    p.candidate =
        !st_.slots.empty() && st_.slots[0].choice >= 0 ? st_.slots[0].choice : least_compressed();
    p.reason =
        !st_.slots.empty() && st_.slots[0].choice >= 0 ? st_.slots[0].reason : DDPH_CHOICE_FASTEST;
  }
  slot.run = slot.last == p.candidate ? slot.run + 1 : 1;
  slot.last = p.candidate;
  p.settled = slot.run > candidates_[size_t(p.candidate)].settle_steps;
  return p;
}

void Chooser::add_norm_sq(double sum_sq) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.norm_sq += sum_sq;
}

void Chooser::measured(const Pick& pick, uint32_t slot, double seconds) {
  const size_t s = std::min<size_t>(slot, kMaxSlots - 1);
  std::lock_guard<std::mutex> lock(mu_);
  window_.seconds += seconds;
  if (!pick.settled || pick.candidate < 0 || size_t(pick.candidate) >= kMaxCandidates) return;
  window_.sum[s][size_t(pick.candidate)] += seconds;
  ++window_.count[s][size_t(pick.candidate)];
}

void Chooser::finished_step(const std::vector<double>& ahead, double period) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t s = 0; s < ahead.size() && s < kMaxSlots; ++s) {
    if (!std::isfinite(ahead[s]) || ahead[s] < 0) continue;
    window_.ahead_sum[s] += ahead[s];
    ++window_.ahead_count[s];
  }
  if (std::isfinite(period) && period >= 0) {
    window_.period_sum += period;
    ++window_.periods;
  }
}

std::vector<double> Chooser::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<double> out(kReportWords, 0.0);
  out[0] = std::sqrt(window_.norm_sq);
  if (window_.seconds > 0) out[1] = smallest_wins(window_.seconds);
  out[2] = window_.new_slot ? 1 : 0;
  for (size_t s = 0; s < kMaxSlots; ++s)
    for (size_t c = 0; c < kMaxCandidates; ++c)
      if (window_.count[s][c] > 0)
        out[3 + s * kMaxCandidates + c] = smallest_wins(window_.sum[s][c] / window_.count[s][c]);
  for (size_t s = 0; s < kMaxSlots; ++s)
    if (window_.ahead_count[s] > 0)
      out[kAheadWord + s] = smallest_wins(window_.ahead_sum[s] / window_.ahead_count[s]);
  if (window_.periods > 0) out[kStepWord] = window_.period_sum / window_.periods;
  out[kStepWord + 1] = window_.steps;
  return out;
}

void Chooser::agreed(const std::vector<double>& combined) {
  DDPH_CHECK(combined.size() == kReportWords, DDPH_INTERNAL,
             "auto: the ranks' report has " << combined.size() << " words, not " << kReportWords);
  {
    std::lock_guard<std::mutex> lock(mu_);
    window_ = Window{};
    window_.steps = 1;  // this step, begun before the exchange
  }
  auto plan = [this] {
    std::vector<int64_t> p = {int64_t(st_.phase), int64_t(st_.round_pos),
                              int64_t(st_.round.size())};
    for (const Slot& s : st_.slots) {
      p.push_back(s.choice);
      p.push_back(s.reason);
    }
    return p;
  };
  const std::vector<int64_t> before = plan();
  // A bucket's time, and the hooks' time in all, is the smallest over the
  // ranks: a rank that reached the bucket sooner adds its wait for the
  // last one, which no candidate changes; the last one's time is what the
  // candidate costs (the others' share of it included: it waits for them
  // inside the collective).
  const double hook_seconds = from_smallest_wins(combined[1]);
  st_.total_seconds += hook_seconds;
  const bool new_slot = combined[2] > 0;
  auto mean = [&](size_t s, int c) {
    return from_smallest_wins(combined[3 + s * kMaxCandidates + size_t(c)]);
  };
  // The smallest over the ranks: a rank whose backward ends sooner after
  // a bucket starts waiting for it sooner.
  for (size_t s = 0; s < st_.slots.size(); ++s)
    if (combined[kAheadWord + s] > 0)
      st_.slots[s].ahead = from_smallest_wins(combined[kAheadWord + s]);
  // The slowest rank's period, less the hooks' seconds per step: what the
  // step spends outside the hooks (the ranks' wait for each other
  // included). Buckets that overlap the backward make it smaller than
  // that time, never larger.
  if (combined[kStepWord] > 0 && combined[kStepWord + 1] > 0)
    st_.rest_seconds = std::max(0.0, combined[kStepWord] - hook_seconds / combined[kStepWord + 1]);
  // Accordion's test, on the agreed norm of the step before this one.
  hold_back_if_norm_jumped(combined[0]);
  const bool held = step_ < st_.held_until;
  if (settings_.deterministic) {
    st_.phase = Phase::kExploit;
    st_.next_exchange = step_ + uint64_t(settings_.recheck_steps);
  } else if (st_.phase == Phase::kWarmup) {
    for (size_t s = 0; s < st_.slots.size(); ++s) {
      const int c = least_compressed();
      if (mean(s, c) > 0) st_.slots[s].agreed[size_t(c)] = mean(s, c);
    }
    start_round(false);
  } else if (st_.phase == Phase::kExplore) {
    const int c = st_.round[st_.round_pos], ref = least_compressed();
    const bool slowdown = after_slowdown();
    for (size_t s = 0; s < st_.slots.size(); ++s) {
      Slot& slot = st_.slots[s];
      if (mean(s, c) <= 0) continue;
      slot.agreed[size_t(c)] = mean(s, c);
      // After a slowdown the reference's last time is the fast link's:
      // what timing it again (a probe) would cost is priced by bytes on
      // the wire from the candidates timed on the new link, the least
      // compressed last (the most compressed explore first).
      if (slowdown && c != ref)
        slot.ref_seconds = mean(s, c) * candidates_[size_t(c)].nominal_ratio /
                           candidates_[size_t(ref)].nominal_ratio;
      // The link model's prediction took the slowdown from a window that
      // began before it, so it can fall short: what c took beyond its
      // prediction is the link's too, and raises the others' by their
      // bytes on the wire before they are weighed for skipping; the
      // bucket's chosen one's time, from that window, rises with them.
      if (slot.predicted[size_t(c)] > 0 && mean(s, c) > slot.predicted[size_t(c)]) {
        const double more =
            (mean(s, c) - slot.predicted[size_t(c)]) * candidates_[size_t(c)].nominal_ratio;
        for (size_t d = 0; d < candidates_.size(); ++d) {
          if (int(d) == c || slot.predicted[d] <= 0) continue;
          slot.predicted[d] += more / candidates_[d].nominal_ratio;
          if (int(d) == slot.choice) slot.agreed[d] = slot.predicted[d];
        }
      }
      if (slowdown) slot.predicted[size_t(c)] = kTimedOnTheNewLink;
      double best = 0;
      for (double t : slot.agreed)
        if (t > 0 && (best == 0 || t < best)) best = t;
      st_.explore_cost += double(explore_steps(c)) * std::max(0.0, mean(s, c) - best);
    }
    ++st_.round_pos;
    next_in_round();
  } else {
    bool drifted = new_slot;
    std::vector<double> now(st_.slots.size(), 0.0);
    double step = st_.rest_seconds;
    for (size_t s = 0; s < st_.slots.size(); ++s) {
      if (st_.slots[s].choice >= 0) now[s] = mean(s, st_.slots[s].choice);
      step += st_.slots[s].decided_seconds;
    }
    // +1 or -1: the bucket got slower or faster by more than the factor 1 +
    // drift (the same factor either way), and by more than kMaterialShare
    // of the step: the small bucket of a compute-bound step, whose time
    // wanders with the ranks' imbalance, does not start rounds.
    auto moved_by = [&](size_t s) {
      const Slot& slot = st_.slots[s];
      if (slot.choice < 0 || now[s] <= 0 || slot.decided_seconds <= 0) return 0;
      const double change = std::log(now[s] / slot.decided_seconds);
      if (std::fabs(change) <= std::log1p(settings_.drift) ||
          std::fabs(now[s] - slot.decided_seconds) < kMaterialShare * step)
        return 0;
      return change > 0 ? 1 : -1;
    };
    for (size_t s = 0; s < st_.slots.size(); ++s)
      drifted = drifted || st_.slots[s].choice < 0 || moved_by(s) != 0;
    // A slower link: the link model predicts each candidate and the round
    // explores only those that can win. Otherwise (a faster link, a new
    // bucket, a probe) the round times the reference first, whose time on
    // a slow link is the dearest of all: it runs only if that, at its last
    // known time, fits in what exploring may still spend.
    const double budget = settings_.explore_share * st_.total_seconds;
    bool slower = false;
    for (size_t s = 0; s < st_.slots.size(); ++s) slower = slower || moved_by(s) > 0;
    const bool probe = step_ >= st_.last_round + kProbeRechecks * uint64_t(settings_.recheck_steps);
    const bool go = slower ? st_.explore_cost <= budget
                           : (drifted || probe) && st_.explore_cost + reference_cost() <= budget;
    if (go) {
      for (size_t s = 0; s < st_.slots.size(); ++s) {
        Slot& slot = st_.slots[s];
        // A bucket whose time held keeps what was measured of it.
        const bool moved = slot.choice < 0 || now[s] <= 0 || slot.decided_seconds <= 0 ||
                           moved_by(s) != 0 || probe;
        if (!moved) {
          slot.agreed[size_t(slot.choice)] = now[s];
          continue;
        }
        // The link model: a candidate's time is its computation plus the
        // link's time per gradient byte over its compression. The chosen
        // one's change gives the link's change; a slower link adds it to
        // every candidate scaled by its compression. (A faster one is cheap
        // to explore in full: nothing is predicted.)
        const int c0 = slot.choice;
        const double extra =
            slower && c0 >= 0 && now[s] > slot.decided_seconds && slot.decided_seconds > 0
                ? (now[s] - slot.decided_seconds) * candidates_[size_t(c0)].nominal_ratio
                : 0;
        // What timing the reference again would cost (a probe's price)
        // grows with the link's time too, at least as far as this window
        // shows (its steps before the change included); the round's
        // timings price it in full.
        const int ref = least_compressed();
        if (extra > 0 && ref != c0 && slot.ref_seconds > 0)
          slot.ref_seconds += extra / candidates_[size_t(ref)].nominal_ratio;
        for (size_t c = 0; c < kMaxCandidates; ++c) {
          // The chosen one's time since the last check stands for it: a
          // prediction too, as its window began before the change.
          if (int(c) == c0)
            slot.predicted[c] = extra > 0 ? now[s] : 0;
          else
            slot.predicted[c] = extra > 0 && slot.agreed[c] > 0
                                    ? slot.agreed[c] + extra / candidates_[c].nominal_ratio
                                    : 0;
          // What was measured before the change no longer holds.
          slot.agreed[c] = int(c) == c0 ? now[s] : 0;
        }
      }
      start_round(!slower);
    } else {
      for (size_t s = 0; s < st_.slots.size(); ++s)
        if (now[s] > 0) st_.slots[s].agreed[size_t(st_.slots[s].choice)] = now[s];
      if (held != st_.held) decide(DDPH_CHOICE_FASTEST);
      st_.next_exchange = step_ + uint64_t(settings_.recheck_steps);
    }
  }
  const int ref = least_compressed();
  for (Slot& slot : st_.slots)
    if (slot.agreed[size_t(ref)] > 0) slot.ref_seconds = slot.agreed[size_t(ref)];
  st_.norm_step = st_.next_exchange - 1;
  changed_ = plan() != before;
  describe();
}

double Chooser::reference_cost() const {
  const int ref = least_compressed();
  double cost = 0;
  for (const Slot& slot : st_.slots) {
    double fastest = 0;
    for (size_t c = 0; c < candidates_.size(); ++c)
      if (slot.agreed[c] > 0 && int(c) != ref && (fastest == 0 || slot.agreed[c] < fastest))
        fastest = slot.agreed[c];
    if (fastest > 0) cost += double(explore_steps(ref)) * std::max(0.0, slot.ref_seconds - fastest);
  }
  return cost;
}

void Chooser::start_round(bool reference_first) {
  st_.last_round = step_;
  st_.round.clear();
  for (int c = 0; c < int(candidates_.size()); ++c) {
    if (candidates_[size_t(c)].nominal_ratio > settings_.max_compression) continue;
    // Measured in every bucket just now (the warm-up's, or the one every
    // bucket ran): nothing to explore.
    bool fresh = !st_.slots.empty();
    for (const Slot& slot : st_.slots) fresh &= slot.agreed[size_t(c)] > 0;
    if (!fresh) st_.round.push_back(c);
  }
  // The most compressed first: on a slow link they are the cheapest to
  // time, and their times tell what the others would cost. Lossy ones
  // go last, except after a slowdown (where timing them first corrects
  // the link model soonest): held against the best of the others, they
  // are not tried where they could not win (a compute-bound step), and
  // training's first steps after the warm-up run exact or 8-bit.
  const int ref = least_compressed();
  const bool lossy_last = !after_slowdown();
  std::stable_sort(st_.round.begin(), st_.round.end(), [&](int a, int b) {
    if (reference_first && (a == ref) != (b == ref)) return a == ref;
    const CandidateInfo &ia = candidates_[size_t(a)], &ib = candidates_[size_t(b)];
    if (lossy_last && ia.lossy() != ib.lossy()) return ib.lossy();
    return ia.nominal_ratio > ib.nominal_ratio;
  });
  st_.phase = Phase::kExplore;
  st_.round_pos = 0;
  next_in_round();
}

bool Chooser::skip(int c) const {
  if (!allowed(c)) return true;  // held back now: explored next round
  if (candidates_[size_t(c)].lossy() && !st_.slots.empty()) {
    // Where lossy_margin of the step is more than the best other
    // candidate's time in every bucket, a lossy one could not win even
    // taking no time at all (a compute-bound step): not worth its steps.
    const std::vector<double> penalty = lossy_penalty();
    bool could_win = false;
    for (size_t s = 0; s < st_.slots.size(); ++s) {
      const double other = fastest_allowed(st_.slots[s], true);
      could_win = could_win || other == 0 || penalty[s] < other;
    }
    if (!could_win) return true;
  }
  // Per bucket, c's estimate against the best of c's own kind (lossy or
  // not): the best of the others is what runs while lossy ones are held
  // back, so it is measured too. Where none of its kind is measured yet
  // (after a slowdown, when only the lossy candidate running then was),
  // the best estimate of its kind is explored and the others are held
  // against it. A bucket with nothing known: explore.
  const bool lossy = candidates_[size_t(c)].lossy();
  double estimate = 0, best = 0;
  for (const Slot& slot : st_.slots) {
    double fastest = 0, fastest_estimate = 0;
    for (int r = 0; r < int(candidates_.size()); ++r) {
      if (candidates_[size_t(r)].lossy() != lossy) continue;
      const double t = slot.agreed[size_t(r)], e = estimated_seconds(slot, r);
      if (t > 0 && (fastest == 0 || t < fastest)) fastest = t;
      if (e > 0 && (fastest_estimate == 0 || e < fastest_estimate)) fastest_estimate = e;
    }
    const double mine = estimated_seconds(slot, c);
    if (mine <= 0 || (fastest == 0 && fastest_estimate == 0)) return false;
    best += fastest > 0 ? fastest : fastest_estimate;
    estimate += mine;
  }
  return !st_.slots.empty() && estimate > kSkipFactor * best;
}

double Chooser::estimated_seconds(const Slot& slot, int c) const {
  if (slot.agreed[size_t(c)] > 0) return slot.agreed[size_t(c)];
  if (slot.predicted[size_t(c)] > 0) return slot.predicted[size_t(c)];
  // Scaled by bytes on the wire from the least compressed candidate with
  // a time here (measured, or predicted after a slowdown) that is less
  // compressed than c: its time is mostly the link's. In a round after a
  // slowdown (in any bucket: one whose time held has no predictions), the
  // nearest one more compressed than c serves too: on the slowed link its
  // time is mostly the link's as well (its computation, scaled up with
  // it, errs toward skipping). The nearest, because PowerSGD's nominal
  // ratio is far below what it saves on a large bucket.
  auto time_of = [&](int r) {
    return slot.agreed[size_t(r)] > 0 ? slot.agreed[size_t(r)] : slot.predicted[size_t(r)];
  };
  const double ratio = candidates_[size_t(c)].nominal_ratio;
  int below = -1, above = -1;
  for (int r = 0; r < int(candidates_.size()); ++r) {
    if (time_of(r) <= 0) continue;
    const double r_ratio = candidates_[size_t(r)].nominal_ratio;
    if (r_ratio < ratio && (below < 0 || r_ratio < candidates_[size_t(below)].nominal_ratio))
      below = r;
    if (r_ratio > ratio && (above < 0 || r_ratio < candidates_[size_t(above)].nominal_ratio))
      above = r;
  }
  const int from = below >= 0 ? below : after_slowdown() ? above : -1;
  if (from < 0) return 0;
  return time_of(from) * candidates_[size_t(from)].nominal_ratio / ratio;
}

bool Chooser::after_slowdown() const {
  for (const Slot& slot : st_.slots)
    for (double t : slot.predicted)
      if (t != 0) return true;
  return false;
}

void Chooser::next_in_round() {
  while (st_.round_pos < st_.round.size() && skip(st_.round[st_.round_pos])) ++st_.round_pos;
  if (st_.round_pos < st_.round.size()) {
    st_.next_exchange = step_ + explore_steps(st_.round[st_.round_pos]);
    return;
  }
  decide(DDPH_CHOICE_FASTEST);
  for (Slot& slot : st_.slots) slot.predicted.fill(0);
  st_.phase = Phase::kExploit;
  st_.next_exchange = step_ + uint64_t(settings_.recheck_steps);
}

double Chooser::weighed(int c, double t, double penalty) const {
  return candidates_[size_t(c)].lossy() ? t + penalty : t;
}

double Chooser::fastest_allowed(const Slot& slot, bool not_lossy) const {
  double fastest = 0;
  for (int c = 0; c < int(candidates_.size()); ++c) {
    const double t = slot.agreed[size_t(c)];
    if (t > 0 && allowed(c) && !(not_lossy && candidates_[size_t(c)].lossy()) &&
        (fastest == 0 || t < fastest))
      fastest = t;
  }
  return fastest;
}

std::vector<double> Chooser::lossy_penalty() const {
  // A lossy candidate needs more steps to the same accuracy: it pays only
  // where the step gets shorter by more than lossy_margin of itself. The
  // step it is held against runs every bucket on its fastest other
  // candidate (the fastest of all where no other was measured).
  double step = st_.rest_seconds, bytes = 0;
  for (const Slot& slot : st_.slots) {
    const double other = fastest_allowed(slot, true);
    step += other > 0 ? other : fastest_allowed(slot, false);
    bytes += double(slot.bytes);
  }
  std::vector<double> penalty;
  for (const Slot& slot : st_.slots)
    penalty.push_back(bytes > 0 ? settings_.lossy_margin * step * double(slot.bytes) / bytes : 0);
  return penalty;
}

void Chooser::decide(ddph_choice_reason_t reason) {
  const bool held = step_ < st_.held_until;
  st_.held = held;
  const std::vector<double> penalty = lossy_penalty();
  for (size_t s = 0; s < st_.slots.size(); ++s) {
    Slot& slot = st_.slots[s];
    auto weigh = [&](int c) { return weighed(c, slot.agreed[size_t(c)], penalty[s]); };
    int best = -1;
    for (int c = 0; c < int(candidates_.size()); ++c) {
      const double t = slot.agreed[size_t(c)];
      if (t <= 0 || !allowed(c)) continue;
      if (best < 0 || weigh(c) < weigh(best)) best = c;
    }
    if (best < 0) {
      slot.choice = least_compressed();
      slot.decided_seconds = 0;
    } else {
      // Near-ties go to the less compressed: the same speed, less error.
      int choice = best;
      const double limit = weigh(best) * (1 + kPreferLessCompressed);
      for (int c = 0; c < int(candidates_.size()); ++c) {
        const double t = slot.agreed[size_t(c)];
        if (t <= 0 || weigh(c) > limit || !allowed(c)) continue;
        if (candidates_[size_t(c)].nominal_ratio < candidates_[size_t(choice)].nominal_ratio)
          choice = c;
      }
      slot.choice = choice;
      slot.decided_seconds = slot.agreed[size_t(choice)];
    }
    slot.reason = held ? DDPH_CHOICE_CRITICAL : reason;
    slot.hidden = false;
  }
  hide_behind_backward();
}

double Chooser::exposed_seconds(const std::vector<double>& t) const {
  // The worker runs a step's buckets one after another, each from its
  // submission (`ahead` before the backward's end, time 0) or the end of
  // the one before, whichever is later.
  double done = -std::numeric_limits<double>::infinity();
  for (size_t s = 0; s < t.size(); ++s) done = std::max(done, -st_.slots[s].ahead) + t[s];
  return std::max(done, 0.0);
}

void Chooser::hide_behind_backward() {
  // What the backward computes after a bucket's submission hides that
  // bucket's reduction: a less compressed candidate there costs the step
  // nothing while it ends within it. A bucket moves to the least
  // compressed candidate that keeps the step's time past the backward
  // within kPreferLessCompressed of what the buckets' own choices give
  // (the near-tie rule, for the step instead of the bucket). The earliest
  // buckets have the most backward after them: they go first.
  std::vector<double> now;
  for (const Slot& slot : st_.slots) {
    if (slot.decided_seconds <= 0) return;  // a bucket not measured: no plan
    now.push_back(slot.decided_seconds);
  }
  const double bound = exposed_seconds(now) * (1 + kPreferLessCompressed);
  for (size_t s = 0; s < st_.slots.size(); ++s) {
    Slot& slot = st_.slots[s];
    if (slot.ahead <= 0) continue;
    int choice = slot.choice;
    for (int c = 0; c < int(candidates_.size()); ++c) {
      const double t = slot.agreed[size_t(c)];
      if (t <= 0 || !allowed(c) ||
          candidates_[size_t(c)].nominal_ratio >= candidates_[size_t(choice)].nominal_ratio)
        continue;
      std::vector<double> trial = now;
      trial[s] = t;
      if (exposed_seconds(trial) <= bound) choice = c;
    }
    if (choice == slot.choice) continue;
    slot.choice = choice;
    slot.decided_seconds = slot.agreed[size_t(choice)];
    slot.hidden = true;
    now[s] = slot.decided_seconds;
  }
}

double Chooser::model_seconds(int c, uint64_t bytes) const {
  const CandidateInfo& info = candidates_[size_t(c)];
  // A ring allreduce or reduce-scatter + allgather puts 2(w-1)/w of the
  // payload on each rank's link.
  const double w = double(std::max(world_size_, 1));
  const double wire_bits = 8.0 * double(bytes) / info.nominal_ratio * 2 * (w - 1) / w;
  return wire_bits / (settings_.link_mbit * 1e6) + double(bytes) * info.cpu_ns_per_byte * 1e-9;
}

void Chooser::hold_back_if_norm_jumped(double norm) {
  if (norm <= 0) return;
  // One step's norm moves with its batch: it is compared with the running
  // mean of the earlier checks', up or down by the same factor, and holds
  // back only when the check before moved the same way past it too. A
  // critical phase lasts many steps; one batch's outlier does not.
  int trend = 0;
  if (settings_.norm_jump > 0 && st_.last_norm > 0) {
    const double change = std::log(norm / st_.last_norm);
    if (std::fabs(change) >= std::log1p(settings_.norm_jump)) trend = change > 0 ? 1 : -1;
  }
  if (trend != 0 && trend == st_.norm_trend)
    st_.held_until = step_ + uint64_t(settings_.hold_steps);
  st_.norm_trend = trend;
  st_.last_norm = st_.last_norm > 0 ? (1 - kNormWeight) * st_.last_norm + kNormWeight * norm : norm;
}

void Chooser::describe() {
  std::ostringstream out;
  out << "auto: step " << step_ << ": ";
  if (st_.phase == Phase::kExplore) {
    out << "exploring " << candidates_[size_t(st_.round[st_.round_pos])].name << " for "
        << explore_steps(st_.round[st_.round_pos]) << " steps";
  } else if (settings_.deterministic) {
    out << "from the stated link (" << settings_.link_mbit << " Mbit/s)"
        << (step_ < st_.held_until ? ", lossy candidates held back: the gradient norm jumped" : "");
  }
  for (size_t s = 0;
       s < st_.slots.size() && st_.phase == Phase::kExploit && !settings_.deterministic; ++s) {
    const Slot& slot = st_.slots[s];
    out << (s ? "; " : "") << "bucket " << s << " (" << slot.bytes << " bytes";
    if (slot.ahead > 0) out << ", " << slot.ahead * 1e3 << " ms of backward after it";
    out << "): " << candidates_[size_t(std::max(slot.choice, 0))].name << ", "
        << choice_reason_name(slot.reason)
        << (slot.reason == DDPH_CHOICE_CRITICAL ? ": the gradient norm jumped" : "");
    if (slot.hidden) out << ", less compressed: the backward hides it";
    out << " (";
    bool first = true;
    for (size_t c = 0; c < candidates_.size(); ++c) {
      if (slot.agreed[c] <= 0) continue;
      out << (first ? "" : ", ") << candidates_[c].name << " " << slot.agreed[c] * 1e3 << " ms";
      first = false;
    }
    out << ")";
  }
  if (st_.total_seconds > 0)
    out << "; exploring cost " << st_.explore_cost << " s of " << st_.total_seconds << " s ("
        << 100 * st_.explore_cost / st_.total_seconds << "%)";
  last_decision_ = out.str();
}

std::string Chooser::save() const {
  LeWriter w;
  put_frame_header(w, kStateMagic, kStateVersion);
  w.put(uint64_t(world_size_), 4);
  w.put(candidates_.size(), 4);
  for (const CandidateInfo& c : candidates_) {
    w.put(c.name.size(), 4);
    w.put_bytes(c.name.data(), c.name.size());
  }
  w.put(uint64_t(st_.phase), 4);
  w.put(st_.held ? 1 : 0, 1);
  for (uint64_t v : {st_.begun, st_.next_exchange, st_.norm_step, st_.held_until, st_.last_round,
                     uint64_t(st_.round_pos)})
    w.put(v, 8);
  w.put(st_.round.size(), 4);
  for (int c : st_.round) w.put(uint64_t(c), 4);
  for (double v : {st_.last_norm, st_.total_seconds, st_.explore_cost}) w.put_double(v);
  w.put(st_.slots.size(), 4);
  for (const Slot& s : st_.slots) {
    w.put(s.bytes, 8);
    for (double t : s.agreed) w.put_double(t);
    for (double t : s.predicted) w.put_double(t);
    w.put(uint64_t(uint32_t(s.choice)), 4);
    w.put(uint64_t(s.reason), 4);
    w.put_double(s.decided_seconds);
    w.put_double(s.ref_seconds);
    w.put(uint64_t(uint32_t(s.last)), 4);
    w.put(s.run, 8);
    w.put_double(s.ahead);
    w.put(s.hidden ? 1 : 0, 1);
  }
  // This rank's timings since the last exchange: a chooser loaded from it
  // reports them at the next one, as this one would have.
  std::lock_guard<std::mutex> lock(mu_);
  for (double v : {window_.seconds, window_.norm_sq}) w.put_double(v);
  w.put(window_.new_slot ? 1 : 0, 1);
  for (size_t s = 0; s < kMaxSlots; ++s)
    for (size_t c = 0; c < kMaxCandidates; ++c) {
      w.put_double(window_.sum[s][c]);
      w.put(window_.count[s][c], 4);
    }
  for (size_t s = 0; s < kMaxSlots; ++s) {
    w.put_double(window_.ahead_sum[s]);
    w.put(window_.ahead_count[s], 4);
  }
  w.put_double(window_.period_sum);
  w.put(window_.periods, 4);
  w.put(window_.steps, 4);
  w.put_double(st_.rest_seconds);
  w.put(uint64_t(st_.norm_trend + 1), 1);
  return finish_frame(w);
}

bool Chooser::load(const void* bytes, size_t n) {
  uint32_t version = 0;
  LeReader r =
      open_frame(bytes, n, kStateMagic, kOldestStateVersion, kStateVersion, "auto chooser state",
                 "the auto chooser (ddph_session_save_state)", &version);
  const int world = int(r.get(4, "world size"));
  const size_t count = size_t(r.get(4, "candidate count"));
  std::vector<std::string> names;
  for (size_t i = 0; i < count && i < kMaxCandidates + 1; ++i) {
    const size_t len = size_t(r.get(4, "candidate name length"));
    const uint8_t* p = r.take(len, "candidate name");
    names.emplace_back(reinterpret_cast<const char*>(p), len);
  }
  std::vector<std::string> mine;
  for (const CandidateInfo& c : candidates_) mine.push_back(c.name);
  auto joined = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
    return out;
  };
  DDPH_CHECK(names == mine, DDPH_INVALID_ARGUMENT,
             "auto chooser state: the checkpoint's candidates are '"
                 << joined(names) << "', this job's are '" << joined(mine) << "'");
  if (world != world_size_) return false;
  State loaded;
  const uint64_t phase = r.get(4, "phase");
  DDPH_CHECK(phase <= uint64_t(Phase::kExploit), DDPH_INVALID_ARGUMENT,
             "auto chooser state: phase " << phase << " is not one this build knows");
  loaded.phase = Phase(phase);
  const uint64_t held = r.get(1, "held back");
  DDPH_CHECK(held <= 1, DDPH_INVALID_ARGUMENT, "auto chooser state: a held-back flag of " << held);
  loaded.held = held == 1;
  loaded.begun = r.get(8, "steps");
  loaded.next_exchange = r.get(8, "next exchange");
  loaded.norm_step = r.get(8, "norm step");
  loaded.held_until = r.get(8, "held until");
  loaded.last_round = r.get(8, "last round");
  loaded.round_pos = size_t(r.get(8, "round position"));
  const size_t round = size_t(r.get(4, "round length"));
  DDPH_CHECK(
      round <= count && loaded.round_pos <= round, DDPH_INVALID_ARGUMENT,
      "auto chooser state: a round of " << round << " candidates at position " << loaded.round_pos);
  for (size_t i = 0; i < round; ++i) {
    const uint64_t c = r.get(4, "round candidate");
    DDPH_CHECK(c < count, DDPH_INVALID_ARGUMENT, "auto chooser state: candidate " << c);
    loaded.round.push_back(int(c));
  }
  DDPH_CHECK(loaded.phase != Phase::kExplore || loaded.round_pos < round, DDPH_INVALID_ARGUMENT,
             "auto chooser state: exploring past the end of its round");
  loaded.last_norm = r.get_double("last norm");
  loaded.total_seconds = r.get_double("total seconds");
  loaded.explore_cost = r.get_double("exploration seconds");
  const size_t slots = size_t(r.get(4, "bucket count"));
  DDPH_CHECK(slots <= kMaxSlots, DDPH_INVALID_ARGUMENT,
             "auto chooser state: " << slots << " buckets, at most " << kMaxSlots);
  for (size_t i = 0; i < slots; ++i) {
    Slot s;
    s.bytes = r.get(8, "bucket bytes");
    for (double& t : s.agreed) t = r.get_double("bucket seconds");
    for (double& t : s.predicted) {
      t = r.get_double("predicted seconds");
      DDPH_CHECK(std::isfinite(t) && (t >= 0 || t == kTimedOnTheNewLink), DDPH_INVALID_ARGUMENT,
                 "auto chooser state: bucket " << i << " has a predicted time of " << t << " s");
    }
    s.choice = int(int32_t(uint32_t(r.get(4, "choice"))));
    s.reason = ddph_choice_reason_t(r.get(4, "reason"));
    s.decided_seconds = r.get_double("decided seconds");
    s.ref_seconds = r.get_double("reference seconds");
    s.last = int(int32_t(uint32_t(r.get(4, "last candidate"))));
    s.run = r.get(8, "run");
    if (version >= 2) {
      s.ahead = r.get_double("backward after the bucket");
      const uint64_t hidden = r.get(1, "hidden");
      DDPH_CHECK(std::isfinite(s.ahead) && s.ahead >= 0 && hidden <= 1, DDPH_INVALID_ARGUMENT,
                 "auto chooser state: bucket " << i << " has " << s.ahead
                                               << " s of backward after it, hidden flag "
                                               << hidden);
      s.hidden = hidden == 1;
    }
    DDPH_CHECK(s.choice >= -1 && s.choice < int(count) && s.last >= -1 && s.last < int(count) &&
                   s.reason <= DDPH_CHOICE_MODEL,
               DDPH_INVALID_ARGUMENT,
               "auto chooser state: bucket " << i << " names candidate " << s.choice);
    loaded.slots.push_back(s);
  }
  Window window;
  window.seconds = r.get_double("window seconds");
  window.norm_sq = r.get_double("window norm");
  const uint64_t new_slot = r.get(1, "window new bucket");
  DDPH_CHECK(new_slot <= 1, DDPH_INVALID_ARGUMENT,
             "auto chooser state: a new-bucket flag of " << new_slot);
  window.new_slot = new_slot == 1;
  for (size_t s = 0; s < kMaxSlots; ++s)
    for (size_t c = 0; c < kMaxCandidates; ++c) {
      window.sum[s][c] = r.get_double("window sum");
      window.count[s][c] = uint32_t(r.get(4, "window count"));
    }
  for (size_t s = 0; s < kMaxSlots && version >= 2; ++s) {
    window.ahead_sum[s] = r.get_double("window backward");
    window.ahead_count[s] = uint32_t(r.get(4, "window backward count"));
  }
  if (version >= 2) {
    window.period_sum = r.get_double("window periods");
    window.periods = uint32_t(r.get(4, "window period count"));
    window.steps = uint32_t(r.get(4, "window steps"));
    loaded.rest_seconds = r.get_double("seconds outside the hooks");
    DDPH_CHECK(std::isfinite(loaded.rest_seconds) && loaded.rest_seconds >= 0,
               DDPH_INVALID_ARGUMENT,
               "auto chooser state: " << loaded.rest_seconds << " s a step outside the hooks");
  }
  if (version >= 3) {
    const uint64_t trend = r.get(1, "norm trend");
    DDPH_CHECK(trend <= 2, DDPH_INVALID_ARGUMENT, "auto chooser state: a norm trend of " << trend);
    loaded.norm_trend = int(trend) - 1;
  }
  DDPH_CHECK(r.left() == 0, DDPH_INVALID_ARGUMENT,
             "auto chooser state: " << r.left() << " bytes after its end");
  std::lock_guard<std::mutex> lock(mu_);
  st_ = std::move(loaded);
  window_ = window;
  in_step_ = false;
  describe();
  return true;
}

}  // namespace loader
}  // namespace ddph
