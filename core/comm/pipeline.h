// Overlapping a hook's own computing with its collectives. A hook that cuts
// a bucket into slices runs each slice in three stages:
//   before(i)   computes what slice i sends (quantizes it, say);
//   transfer(i) runs slice i's collective;
//   after(i)    uses what slice i received (decodes it into the bucket).
// run_pipelined runs before and after on a helper thread and every
// transfer on the calling thread, so that collectives stay on the thread
// the session gave the hook ([serialized] per communicator) and slice i is
// on the wire while slice i + 1 is computed and slice i - 1 is used. A step
// then takes about max(computing, transfer) instead of their sum.
//
// Order: before(i) ends before transfer(i) starts, transfer(i) before
// after(i); before and after run in the order before(0), before(1),
// after(0), before(2), after(1), ..., after(count - 1), never two at once,
// so they may share scratch. The first exception of any stage stops the
// pipeline (no later stage starts) and is rethrown to the caller once the
// helper thread has ended: no stage touches the caller's buffers after
// run_pipelined returns or throws.
#pragma once

#include <cstddef>
#include <functional>

namespace ddph {

struct PipelineStages {
  std::function<void(size_t)> before;  // may be empty
  std::function<void(size_t)> transfer;
  std::function<void(size_t)> after;  // may be empty
};

// count 0 does nothing; count 1 runs the three stages inline on the caller.
void run_pipelined(size_t count, const PipelineStages& stages);

// One computing step beside one transfer that does not depend on it:
// compute on the helper thread, transfer on the caller, both finished when
// it returns. The first exception (transfer's if both throw) is rethrown.
void run_beside(const std::function<void()>& compute, const std::function<void()>& transfer);

}  // namespace ddph
