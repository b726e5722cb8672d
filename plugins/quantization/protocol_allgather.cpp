// protocol: allgather. PyTorch's quantization_pertensor_hook and
// quantization_perchannel_hook: every rank quantizes its whole bucket with
// its own scales and zero points, all ranks gather everything, and each
// dequantizes every rank's codes with that rank's params, summing in fp32 in
// rank order from zeros, then divides by the world size (a channel whose
// fp32 sum could overflow is summed in double: wire_segment.h's
// decode_mean).
//
// PyTorch gathers the params and the codes in two allgathers; here one
// block per rank carries both, behind the rank header, which changes no value. PyTorch's
// per-channel pads a bucket whose length is a multiple of the channel size with a whole zero
// channel; that channel is never part of the result, so it is not sent.
#include <utility>

#include "core/comm/comm_call.h"
#include "core/quant/codec.h"
#include "core/quant/rank_header.h"
#include "plugins/quantization/protocols.h"

namespace ddph {
namespace quantization {

Outcome run_allgather(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                      Workspace& ws) {
  const Segment seg{job.n, o.channel_size != 0 ? o.channel_size : job.n};
  const size_t block = kRankHeaderBytes + encoded_bytes(seg, o.bits);
  const size_t world = size_t(job.world);
  Codec codec(job.at, ws.scratch, o.bits, seg.n, segment_channels(seg), 1);
  GatheredBlocks got = gather_blocks(comm, codec, job, ws, block, seg, job.data,
                                     own_encode_args(own_encoding(o), job, 0));
  if (!got.out.nonfinite_ranks.empty()) return got.out;

  // The bucket's own values are already in `own`, so the bucket itself can
  // take the mean.
  codec.decode_mean(got.blocks + kRankHeaderBytes, block, world, seg, o.bits, job.world, job.data);
  return got.out;
}

GatheredBlocks gather_blocks(ddph_comm_t* comm, Codec& codec, const BucketJob& job, Workspace& ws,
                             size_t block, const Segment& seg, const float* src,
                             const EncodeArgs& args) {
  const size_t world = size_t(job.world);
  ScratchBuffers::Lease lease = ws.scratch.get(job.at, kGatherKey, world * block);
  uint8_t* all = static_cast<uint8_t*>(lease.data());
  uint8_t* own = all + size_t(job.rank) * block;
  codec.encode(src, seg, args, own + kRankHeaderBytes);
  codec.write_rank_header(own);
  // In place: this rank's block of recv is the send buffer.
  FlatTensor send(own, DType::U8, int64_t(block), job.at.device);
  FlatTensor recv(all, DType::U8, int64_t(world * block), job.at.device);
  comm_allgather(comm, send, recv, job.at.stream);
  Outcome out;
  out.bytes = block;
  out.nonfinite_ranks = codec.nonfinite_senders(all, block, job.world);
  return GatheredBlocks{std::move(lease), all, std::move(out)};
}

}  // namespace quantization
}  // namespace ddph
