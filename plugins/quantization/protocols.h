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
#include "core/quant/codec.h"
#include "core/quant/scatter.h"
#include "plugins/quantization/options.h"

namespace ddph {
namespace quantization {

// One float32 bucket on its way through a protocol: core's exchange job,
// and for reduce_scatter with error feedback the owner residual of this
// rank's chunk, sized on request (the chunk's length is the protocol's
// business).
struct BucketJob : ScatterJob {
  std::function<float*(size_t)> owner_residual;
};

// bucket as a protocol's job (data, rank, world, index, step, memory),
// after refusing a dtype other than float32 and a CUDA bucket in a build
// without CUDA, both naming `who` ("quantization/per_tensor"). Pinned host
// memory is host memory: the host path, and host-labelled scratch (plain
// host memory) for the communicator.
BucketJob bucket_job(ddph_comm_t* comm, const ddph_bucket_t& bucket, DType dtype, const char* who);

// Buffers a hook reuses from bucket to bucket (run_bucket is serialized):
// on the host one per role, kept; on a GPU pool memory leased per run.
struct Workspace {
  ScratchBuffers scratch;
};

// Workspace keys of the protocols' further buffers (the codec and
// core/quant/scatter.h have their own).
enum : uint64_t { kGatherKey = 2, kAccKey = 3 };

// What a protocol did with a bucket.
struct Outcome {
  uint64_t bytes = 0;  // payload bytes this rank handed to collectives
  // Ranks whose bucket held NaN or Inf, the same list on every rank. When
  // not empty, the bucket and the owner residuals were left untouched.
  std::vector<int> nonfinite_ranks;
};

// The exchange both gathers make (protocol allgather, per_channel_gather):
// codec encodes `src` (seg of it, with args) into this rank's block of a
// world x block receive buffer, behind the rank header, one allgather
// fills the other ranks' blocks, and every rank reads which ranks sent NaN
// or Inf. `blocks` (rank r's block at r * block) is valid while it lives.
struct GatheredBlocks {
  ScratchBuffers::Lease lease;
  const uint8_t* blocks;
  Outcome out;
};
GatheredBlocks gather_blocks(ddph_comm_t* comm, Codec& codec, const BucketJob& job, Workspace& ws,
                             size_t block, const Segment& seg, const float* src,
                             const EncodeArgs& args);

// How this rank quantizes its own data under o.
inline OwnEncoding own_encoding(const QuantOptions& o) {
  return OwnEncoding{o.bits, o.rounding == Rounding::kStochastic, o.seed};
}

Outcome run_allgather(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                      Workspace& ws);
Outcome run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                           Workspace& ws);
// Protocol shard, step 1 and the owner's mean of reduce_scatter only: this
// rank's chunk (split_chunks) holds the fp32 mean of the world's encodings
// of it; the bucket's other chunks are left as scratch. No owner residual:
// the mean is not re-quantized.
Outcome run_shard(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job, Workspace& ws);
// per_channel_gather (FSDP2's weight all-gather, ZeRO++'s qwZ): the bucket
// is world equal rows, this rank's row filled; each row is a segment of
// channels of o.channel_size (its last one shorter when the row is not
// whole channels). Each rank
// quantizes its own row (nearest, o.bits, o.channel_size), the codes are
// all-gathered, and every row, this rank's too, becomes the decoded codes,
// so every rank holds the same bits. Not a mean: a gradient hook's
// contract does not apply. When some row is not finite the bucket is left
// as it was (the caller falls back or fails).
Outcome run_gather(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job, Workspace& ws);

}  // namespace quantization
}  // namespace ddph
