// protocol: reduce_scatter. A bandwidth-optimal quantized allreduce for any
// world size:
//   1. each rank quantizes chunk j of its bucket (its own params, its
//      rounding, its error feedback) and sends it, behind its rank header,
//      to rank j, the chunk's owner: one alltoallv for all chunks;
//   2. each owner dequantizes the world-size contributions to its chunk,
//      summing in fp32 in rank order, divides by the world size, and
//      re-quantizes the mean (nearest);
//   3. an allgather hands every rank every owner's re-quantized chunk, and
//      every rank dequantizes the same bytes, so all end bit-identical.
// Each rank sends about 2 (W-1)/W of the bucket's codes, plus params:
// the figure does not grow with W.
//
// The owner dequantizes its own quantized chunk too, rather than adding its
// exact values: every contribution is then quantized exactly once, the same
// for every rank, and error feedback sees the error of what it sent.
//
// With error feedback the owner also keeps the error of re-quantizing its
// chunk's mean and adds it to the next step's mean (DeepSpeed's "server
// error"), so no quantization error of this protocol is lost for good.
#include <algorithm>
#include <cstring>

#include "core/comm_call.h"
#include "core/kernels/divide.h"
#include "plugins/quantization/chunking.h"
#include "plugins/quantization/protocols.h"
#include "plugins/quantization/rank_header.h"

namespace ddph {
namespace quantization {

Outcome run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                           Workspace& ws) {
  const int world = job.world, rank = job.rank;
  const size_t w = static_cast<size_t>(world);
  const std::vector<Chunk> chunks = split_chunks(job.n, o.channel_size, world);
  // Contribution j (to rank j): the rank header, then chunk j's encoding.
  std::vector<int64_t> send_counts(w);
  std::vector<size_t> offset(w + 1, 0);  // of contribution j in ws.send
  size_t widest = 0;
  for (size_t j = 0; j < w; ++j) {
    const size_t bytes = encoded_bytes(chunks[j].seg, o.bits);
    send_counts[j] = int64_t(kRankHeaderBytes + bytes);
    offset[j + 1] = offset[j] + size_t(send_counts[j]);
    widest = std::max(widest, bytes);
  }
  const Chunk& mine = chunks[size_t(rank)];
  const size_t mine_bytes = size_t(send_counts[size_t(rank)]);  // from every rank, header included
  const std::vector<int64_t> recv_counts(w, static_cast<int64_t>(mine_bytes));

  // 1. Quantize every chunk of this rank's data and trade contributions.
  if (ws.send.size() < offset[w]) ws.send.resize(offset[w]);
  bool finite = true;
  for (size_t j = 0; j < w; ++j)
    finite &= encode_segment(job.data + chunks[j].begin, chunks[j].seg,
                             own_encode_args(o, job, chunks[j].begin),
                             ws.send.data() + offset[j] + kRankHeaderBytes, ws.codec);
  for (size_t j = 0; j < w; ++j) write_rank_header(ws.send.data() + offset[j], finite);
  if (ws.recv.size() < w * mine_bytes) ws.recv.resize(w * mine_bytes);
  {
    FlatTensor send(ws.send.data(), DType::U8, int64_t(offset[w]), job.device);
    FlatTensor recv(ws.recv.data(), DType::U8, int64_t(w * mine_bytes), job.device);
    comm_alltoallv(comm, send, send_counts, recv, recv_counts, job.stream);
  }
  Outcome out;
  out.bytes = offset[w] - mine_bytes;  // the own contribution stays local
  out.nonfinite_ranks = nonfinite_senders(ws.recv.data(), mine_bytes, world);
  if (!out.nonfinite_ranks.empty()) return out;

  // 2. The owner's mean of its chunk, in rank order from zeros.
  const size_t m = mine.seg.n;
  if (ws.acc.size() < m) ws.acc.resize(m);
  float* acc = ws.acc.data();
  std::fill(acc, acc + m, 0.0f);
  for (size_t r = 0; r < w; ++r)
    decode_add(ws.recv.data() + r * mine_bytes + kRankHeaderBytes, mine.seg, o.bits, acc, ws.codec);
  divide_inplace(DType::F32, acc, m, world);

  // 3. Re-quantize the mean and gather every owner's chunk. allgather wants
  // equal blocks: each is padded to the widest chunk's encoding.
  if (ws.gather.size() < w * widest) ws.gather.resize(w * widest);
  uint8_t* own = ws.gather.data() + size_t(rank) * widest;
  EncodeArgs nearest;
  nearest.bits = o.bits;
  if (job.owner_residual) nearest.residual = job.owner_residual(m);
  // Finite inputs can still sum past FLT_MAX; then the chunk decodes to NaN
  // on every rank instead of to a scale computed from Inf.
  if (!encode_segment(acc, mine.seg, nearest, own, ws.codec)) encode_nan(mine.seg, o.bits, own);
  const size_t own_bytes = mine_bytes - kRankHeaderBytes;
  std::memset(own + own_bytes, 0, widest - own_bytes);
  if (widest != 0) {
    FlatTensor send(own, DType::U8, int64_t(widest), job.device);
    FlatTensor recv(ws.gather.data(), DType::U8, int64_t(w * widest), job.device);
    comm_allgather(comm, send, recv, job.stream);
    out.bytes += widest;
  }
  for (int j = 0; j < world; ++j)
    decode_into(ws.gather.data() + size_t(j) * widest, chunks[j].seg, o.bits,
                job.data + chunks[j].begin, ws.codec);
  return out;
}

}  // namespace quantization
}  // namespace ddph
