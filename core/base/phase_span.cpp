#include "core/base/phase_span.h"

#include <chrono>

#include "core/base/host.h"
#include "core/base/thread_slot.h"

namespace ddph {
namespace {
// The DeferredSpans collecting on each thread (a ThreadSlot, not a
// thread_local: this file goes into dlopen'ed plugins).
ThreadSlot<DeferredSpans>& deferred_by_thread() {
  static ThreadSlot<DeferredSpans> slot;
  return slot;
}
}  // namespace

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void report_span(const ddph_bucket_t* bucket, ddph_phase_t phase, uint64_t start_ns,
                 uint64_t end_ns) {
  if (DeferredSpans* deferred = deferred_by_thread().get()) {
    try {
      deferred->keep({bucket, phase, start_ns, end_ns});
    } catch (...) {
      // Out of memory for a trace record: the trace goes without it.
    }
    return;
  }
  const ddph_host_t* h = host();
  // An older loader's table ends before span.
  if (h != nullptr && h->struct_size >= DDPH_HOST_SIZE_V1_7 && h->span != nullptr)
    h->span(bucket, phase, start_ns, end_ns);
}

DeferredSpans::Collect::Collect(DeferredSpans& into)
    : outer_(deferred_by_thread().exchange(&into)) {}
DeferredSpans::Collect::~Collect() {
  deferred_by_thread().exchange(outer_);  // erases or overwrites: cannot throw
}

void DeferredSpans::report() {
  for (const Span& s : spans_) report_span(s.bucket, s.phase, s.start_ns, s.end_ns);
  spans_.clear();
}

}  // namespace ddph
