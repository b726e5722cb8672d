// The two ways a quantized bucket is averaged. Both run on the session's
// worker thread, in the same order on every rank, and leave the mean in the
// bucket, identical on every rank, unless some rank's bucket holds NaN or
// Inf: every rank then learns it from the first exchange (rank_header.h)
// and returns with the bucket untouched.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/kernels/on_device.h"
#include "plugins/quantization/options.h"
#include "plugins/quantization/wire_segment.h"

namespace ddph {
namespace quantization {

// One float32 bucket on its way through a protocol.
struct BucketJob {
  float* data = nullptr;
  size_t n = 0;
  int rank = 0, world = 1;
  uint64_t index = 0, step = 0;
  // n floats of error feedback, or NULL: where the new residual goes, even
  // when the outcome is non-finite, so the hook keeps it only on success.
  float* residual = nullptr;
  // The old residual, read only; NULL: `residual` holds it and is updated
  // in place. The hook passes the kept one here and a spare buffer as
  // `residual`, which spares it a copy per bucket.
  const float* residual_in = nullptr;
  // reduce_scatter with error feedback: the owner residual of this rank's
  // chunk, sized on request (the chunk's length is the protocol's business).
  std::function<float*(size_t)> owner_residual;
  // Where data, residual and owner_residual live, and the stream of a CUDA
  // bucket: every buffer of the run is in the same memory.
  Where at{DLDevice{kDLCPU, 0}, nullptr};
};

// Buffers a hook reuses from bucket to bucket (run_bucket is serialized):
// on the host one per role, kept; on a GPU pool memory leased per run.
struct Workspace {
  ScratchBuffers scratch;
};

// Workspace keys of the protocols' buffers (the codec has its own).
enum : uint64_t { kSendKey = 0, kRecvKey = 1, kGatherKey = 2, kAccKey = 3 };

// What a protocol did with a bucket.
struct Outcome {
  uint64_t bytes = 0;  // payload bytes this rank handed to collectives
  // Ranks whose bucket held NaN or Inf, the same list on every rank. When
  // not empty, the bucket and the owner residuals were left untouched.
  std::vector<int> nonfinite_ranks;
};

// The stochastic-rounding counter of element 0 of a bucket on a rank: unique
// per (rank, step, bucket index) in its high 32 bits, the element index goes
// in the low 32 bits. The same on every run, so runs are reproducible.
uint64_t counter_base(int rank, uint64_t step, uint64_t index);

// The first quantization of a rank's own data over elements [begin, ...).
EncodeArgs own_encode_args(const QuantOptions& o, const BucketJob& job, size_t begin);

Outcome run_allgather(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                      Workspace& ws);
Outcome run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                           Workspace& ws);

}  // namespace quantization
}  // namespace ddph
