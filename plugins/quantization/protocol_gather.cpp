// per_channel_gather: a quantized all-gather of world rows (ZeRO++'s qwZ,
// for FSDP2's weight all-gather). One block per rank, the rank header then
// the row's encoding (wire_segment.h), in one allgather; each rank then
// decodes every block into its row, its own block too, so that the bucket
// holds the same values on every rank (the weights every rank computes
// with). Nearest rounding only: the forward's and the backward's gather of
// the same weights must decode to the same values.
#include "core/comm/comm_call.h"
#include "core/quant/codec.h"
#include "core/quant/rank_header.h"
#include "plugins/quantization/protocols.h"

namespace ddph {
namespace quantization {

Outcome run_gather(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job, Workspace& ws) {
  const size_t world = size_t(job.world), row = job.n / world;
  const Segment seg{row, o.channel_size};
  const size_t block = kRankHeaderBytes + encoded_bytes(seg, o.bits);
  Codec codec(job.at, ws.scratch, o.bits, seg.n, segment_channels(seg), 1);
  EncodeArgs args;
  args.bits = o.bits;
  GatheredBlocks got =
      gather_blocks(comm, codec, job, ws, block, seg, job.data + size_t(job.rank) * row, args);
  if (!got.out.nonfinite_ranks.empty()) return got.out;
  for (size_t r = 0; r < world; ++r)
    codec.decode_into(got.blocks + r * block + kRankHeaderBytes, seg, o.bits, job.data + r * row);
  return got.out;
}

}  // namespace quantization
}  // namespace ddph
