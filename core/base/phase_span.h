// A bucket's phases for the loader's trace (ddph_host_t.span, ABI 1.7):
//   { PhaseSpan span(DDPH_PHASE_COMPRESS); encode(...); }
// reads the monotonic clock when made and reports the phase when it goes,
// two clock reads and one call per phase: put it around a whole encode or
// collective, never inside a per-element loop. Under a loader older than
// 1.7 it reads the clock and reports nothing.
//
// The loader finds the bucket from the calling thread (its worker). Work a
// hook does on a thread of its own either passes the bucket it was handed
// (a step thread) or runs under DeferredSpans (core's pipeline helper),
// whose spans its owner reports from the worker once the work is joined.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

namespace ddph {

// std::chrono::steady_clock (CLOCK_MONOTONIC on Linux) in nanoseconds: the
// clock of ddph_host_t.span and ddph_span_t.
uint64_t monotonic_ns();

// Reports one phase now, or keeps it for the thread's DeferredSpans.
void report_span(const ddph_bucket_t* bucket, ddph_phase_t phase, uint64_t start_ns,
                 uint64_t end_ns);

class PhaseSpan {
 public:
  explicit PhaseSpan(ddph_phase_t phase, const ddph_bucket_t* bucket = nullptr)
      : bucket_(bucket), phase_(phase), start_ns_(monotonic_ns()) {}
  ~PhaseSpan() { report_span(bucket_, phase_, start_ns_, monotonic_ns()); }
  PhaseSpan(const PhaseSpan&) = delete;
  PhaseSpan& operator=(const PhaseSpan&) = delete;

 private:
  const ddph_bucket_t* bucket_;
  ddph_phase_t phase_;
  uint64_t start_ns_;
};

// While alive on a thread, the spans reported there are kept instead
// (a helper thread's, whose bucket the loader cannot tell); report() hands
// them on from the thread that owns the work, after the helper is done.
class DeferredSpans {
 public:
  struct Span {
    const ddph_bucket_t* bucket;
    ddph_phase_t phase;
    uint64_t start_ns, end_ns;
  };
  // Collects on the constructing thread until destroyed (nests).
  class Collect {
   public:
    explicit Collect(DeferredSpans& into);
    ~Collect();
    Collect(const Collect&) = delete;
    Collect& operator=(const Collect&) = delete;

   private:
    DeferredSpans* outer_;
  };
  // Reports every kept span on the calling thread, in order, and forgets them.
  void report();
  void keep(const Span& s) { spans_.push_back(s); }

 private:
  std::vector<Span> spans_;
};

}  // namespace ddph
