// protocol: allgather. PyTorch's quantization_pertensor_hook and
// quantization_perchannel_hook: every rank quantizes its whole bucket with
// its own scales and zero points, all ranks gather everything, and each
// dequantizes every rank's codes with that rank's params, summing in fp32 in
// rank order from zeros, then divides by the world size.
//
// PyTorch gathers the params and the codes in two allgathers; here one
// block per rank carries both, behind the rank header, which changes no value. PyTorch's
// per-channel pads a bucket whose length is a multiple of the channel size with a whole zero
// channel; that channel is never part of the result, so it is not sent.
#include <algorithm>

#include "core/comm_call.h"
#include "core/kernels/divide.h"
#include "plugins/quantization/protocols.h"
#include "plugins/quantization/rank_header.h"

namespace ddph {
namespace quantization {

Outcome run_allgather(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                      Workspace& ws) {
  const Segment seg{job.n, o.channel_size != 0 ? o.channel_size : job.n};
  const size_t block = kRankHeaderBytes + encoded_bytes(seg, o.bits);
  const size_t world = size_t(job.world);
  if (ws.recv.size() < world * block) ws.recv.resize(world * block);
  uint8_t* all = ws.recv.data();
  uint8_t* own = all + size_t(job.rank) * block;
  const bool finite =
      encode_segment(job.data, seg, own_encode_args(o, job, 0), own + kRankHeaderBytes, ws.codec);
  write_rank_header(own, finite);

  // In place: this rank's block of recv is the send buffer.
  FlatTensor send(own, DType::U8, int64_t(block), job.device);
  FlatTensor recv(all, DType::U8, int64_t(world * block), job.device);
  comm_allgather(comm, send, recv, job.stream);
  Outcome out;
  out.bytes = block;
  out.nonfinite_ranks = nonfinite_senders(all, block, job.world);
  if (!out.nonfinite_ranks.empty()) return out;

  // The bucket's own values are already in `own`, so the bucket itself can
  // be the fp32 accumulator.
  std::fill(job.data, job.data + job.n, 0.0f);
  for (size_t r = 0; r < world; ++r)
    decode_add(all + r * block + kRankHeaderBytes, seg, o.bits, job.data, ws.codec);
  divide_inplace(DType::F32, job.data, job.n, job.world);
  return out;
}

}  // namespace quantization
}  // namespace ddph
