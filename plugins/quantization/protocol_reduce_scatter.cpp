// protocol: reduce_scatter. A bandwidth-optimal quantized allreduce for any
// world size:
//   1. each rank quantizes chunk j of its bucket (its own params, its
//      rounding, its error feedback) and sends it to rank j, the chunk's
//      owner;
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

namespace ddph {
namespace quantization {

uint64_t run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                            Workspace& ws) {
  const int world = job.world, rank = job.rank;
  const std::vector<Chunk> chunks = split_chunks(job.n, o.channel_size, world);
  std::vector<size_t> offset(size_t(world) + 1, 0);  // of chunk j's encoding in ws.send
  size_t widest = 0;
  for (int j = 0; j < world; ++j) {
    const size_t bytes = encoded_bytes(chunks[j].seg, o.bits);
    offset[j + 1] = offset[j] + bytes;
    widest = std::max(widest, bytes);
  }
  uint64_t out_bytes = 0;

  // 1. Quantize every chunk of this rank's data, then exchange: at step k
  // send to rank + k, receive from rank - k, so that each step pairs ranks
  // up instead of everyone waiting on the same peer.
  if (ws.send.size() < offset[world]) ws.send.resize(offset[world]);
  for (int j = 0; j < world; ++j)
    encode_segment(job.data + chunks[j].begin, chunks[j].seg,
                   own_encode_args(o, job, chunks[j].begin), ws.send.data() + offset[j], ws.codec);
  const Chunk& mine = chunks[rank];
  const size_t mine_bytes = offset[rank + 1] - offset[rank];
  if (ws.recv.size() < size_t(world) * mine_bytes) ws.recv.resize(size_t(world) * mine_bytes);
  for (int k = 1; k < world; ++k) {
    const int to = (rank + k) % world, from = (rank - k + world) % world;
    const size_t to_bytes = offset[to + 1] - offset[to];
    if (to_bytes != 0) {
      FlatTensor t(ws.send.data() + offset[to], DType::U8, int64_t(to_bytes), job.device);
      comm_send(comm, t, to, job.stream);
      out_bytes += to_bytes;
    }
    if (mine_bytes != 0) {
      FlatTensor t(ws.recv.data() + size_t(from) * mine_bytes, DType::U8, int64_t(mine_bytes),
                   job.device);
      comm_recv(comm, t, from, job.stream);
    }
  }

  // 2. The owner's mean of its chunk, in rank order from zeros.
  const size_t m = mine.seg.n;
  if (ws.acc.size() < m) ws.acc.resize(m);
  float* acc = ws.acc.data();
  std::fill(acc, acc + m, 0.0f);
  for (int r = 0; r < world; ++r) {
    const uint8_t* src =
        r == rank ? ws.send.data() + offset[rank] : ws.recv.data() + size_t(r) * mine_bytes;
    decode_add(src, mine.seg, o.bits, acc, ws.codec);
  }
  divide_inplace(DType::F32, acc, m, world);

  // 3. Re-quantize the mean and gather every owner's chunk. allgather wants
  // equal blocks: each is padded to the widest chunk's encoding.
  if (ws.gather.size() < size_t(world) * widest) ws.gather.resize(size_t(world) * widest);
  uint8_t* own = ws.gather.data() + size_t(rank) * widest;
  EncodeArgs nearest;
  nearest.bits = o.bits;
  if (job.owner_residual) nearest.residual = job.owner_residual(m);
  // Finite inputs can still sum past FLT_MAX; then the chunk decodes to NaN
  // on every rank instead of to a scale computed from Inf.
  if (!encode_segment(acc, mine.seg, nearest, own, ws.codec)) encode_nan(mine.seg, o.bits, own);
  std::memset(own + mine_bytes, 0, widest - mine_bytes);
  if (widest != 0) {
    FlatTensor send(own, DType::U8, int64_t(widest), job.device);
    FlatTensor recv(ws.gather.data(), DType::U8, int64_t(size_t(world) * widest), job.device);
    comm_allgather(comm, send, recv, job.stream);
    out_bytes += widest;
  }
  for (int j = 0; j < world; ++j)
    decode_into(ws.gather.data() + size_t(j) * widest, chunks[j].seg, o.bits,
                job.data + chunks[j].begin, ws.codec);
  return out_bytes;
}

}  // namespace quantization
}  // namespace ddph
