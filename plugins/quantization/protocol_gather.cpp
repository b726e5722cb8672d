// per_channel_gather: a quantized all-gather of world rows (ZeRO++'s qwZ,
// for FSDP2's weight all-gather). One block per rank, the rank header then
// the row's encoding (wire_segment.h), in one allgather; each rank then
// decodes every block into its row, its own block too, so that the bucket
// holds the same values on every rank (the weights every rank computes
// with). Nearest rounding only: the forward's and the backward's gather of
// the same weights must decode to the same values.
#include "core/hook/comm_call.h"
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
  const ScratchBuffers::Lease recv_buf = ws.scratch.get(job.at, kGatherKey, world * block);
  uint8_t* all = static_cast<uint8_t*>(recv_buf.data());
  uint8_t* own = all + size_t(job.rank) * block;
  EncodeArgs args;
  args.bits = o.bits;
  codec.encode(job.data + size_t(job.rank) * row, seg, args, own + kRankHeaderBytes);
  codec.write_rank_header(own);

  // In place: this rank's block of recv is the send buffer.
  FlatTensor send(own, DType::U8, int64_t(block), job.at.device);
  FlatTensor recv(all, DType::U8, int64_t(world * block), job.at.device);
  comm_allgather(comm, send, recv, job.at.stream);
  Outcome out;
  out.bytes = block;
  out.nonfinite_ranks = codec.nonfinite_senders(all, block, job.world);
  if (!out.nonfinite_ranks.empty()) return out;
  for (size_t r = 0; r < world; ++r)
    codec.decode_into(all + r * block + kRankHeaderBytes, seg, o.bits, job.data + r * row);
  return out;
}

}  // namespace quantization
}  // namespace ddph
