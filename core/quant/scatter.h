// The first exchange of a quantized reduce-scatter: each rank quantizes
// chunk j of its bucket (its own scales, rounding and error feedback) and
// sends it, behind its rank header (rank_header.h), to rank j, the chunk's
// owner, in one alltoallv per slice. Each owner then holds the world's
// encodings of its chunk: the quantization family's reduce_scatter protocol
// re-quantizes their mean and all-gathers it; the zero family steps the mean
// of its shard. The bytes sent are (W-1)/W of the bucket's codes plus params.
//
// On the host a bucket of whole channels may travel in slices: slice s holds
// piece s of every chunk, and slice s is on the wire while slice s + 1 is
// quantized (core/comm/pipeline.h). Every channel keeps its scale, rounding
// counters and residual, so the codes are the same for any slice count.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kernels/on_device.h"
#include "core/quant/chunking.h"
#include "core/quant/codec.h"

namespace ddph {
namespace quantization {

// How a rank quantizes its own data.
struct OwnEncoding {
  int bits = 8;
  bool stochastic = false;
  uint64_t seed = 0;
};

// One float32 bucket on its way through a quantized exchange.
struct ScatterJob {
  float* data = nullptr;
  size_t n = 0;
  int rank = 0, world = 1;
  uint64_t index = 0, step = 0;
  // n floats of error feedback, or NULL: where the new residual goes, even
  // when the outcome is non-finite, so the hook keeps it only on success.
  float* residual = nullptr;
  // The old residual, read only; NULL: `residual` holds it and is updated
  // in place. A hook passes the kept one here and a spare buffer as
  // `residual`, which spares it a copy per bucket.
  const float* residual_in = nullptr;
  // Where data and the residuals live, and the stream of a CUDA bucket:
  // every buffer of the run is in the same memory.
  Where at{DLDevice{kDLCPU, 0}, nullptr};
};

// Workspace keys of the exchange's buffers (the codec has its own, from
// 100; a protocol's further buffers take 2 to 99).
enum : uint64_t { kScatterSendKey = 0, kScatterRecvKey = 1 };

// The stochastic-rounding counter of element 0 of a bucket on a rank: unique
// per (rank, step, bucket index) in its high 32 bits, the element index goes
// in the low 32 bits. The same on every run, so runs are reproducible.
uint64_t counter_base(int rank, uint64_t step, uint64_t index);

// The first quantization of a rank's own data over elements [begin, ...).
EncodeArgs own_encode_args(const OwnEncoding& e, const ScatterJob& job, size_t begin);

// Where one slice lies in the exchange's buffers (and in the allgather of
// owners' encodings that the quantization family adds).
struct ScatterSlice {
  std::vector<Chunk> pieces;  // piece j goes to rank j
  // Contribution j: the rank header, then piece j's encoding.
  std::vector<int64_t> send_counts;
  std::vector<size_t> send_at;  // of contribution j, from the send buffer's start
  size_t send_begin = 0, send_bytes = 0;
  size_t mine_bytes = 0;    // each rank's contribution to this rank's piece, header included
  size_t recv_begin = 0;    // world contributions of mine_bytes each
  size_t widest = 0;        // the slice's widest encoding
  size_t gather_begin = 0;  // of the slice's world blocks of `widest` bytes
};

struct ScatterLayout {
  std::vector<Chunk> chunks;  // chunk j is rank j's
  std::vector<ScatterSlice> slices;
  size_t send_bytes = 0, recv_bytes = 0, gather_bytes = 0;
  size_t longest = 0, most_channels = 0;  // over every piece, for the codec's scratch
};

// The exchange of `chunks` (one per rank, contiguous, in rank order) at
// `bits`, in `slices` slices (1 unless channel_size > 0: a slice must cut
// chunks at whole channels).
ScatterLayout lay_out_scatter(const std::vector<Chunk>& chunks, size_t channel_size, int bits,
                              int rank, size_t slices);

// Slices only pay for big host buckets of whole channels: `requested`, or
// when 0 one per 8 MiB of floats, at most 4. (More, smaller slices measured
// slower on a 1 Gbit/s link: each is one more round trip of every rank;
// docs/lab.md.)
size_t scatter_slice_count(const ScatterJob& job, size_t channel_size, size_t requested);

// What the exchange received.
struct Scattered {
  ScratchBuffers::Lease sent, received;
  // Slice s's world contributions to this rank's piece, in rank order, each
  // mine_bytes (header first), from received + slices[s].recv_begin.
  const uint8_t* contributions(const ScatterSlice& s) const {
    return static_cast<const uint8_t*>(received.data()) + s.recv_begin;
  }
  uint64_t bytes = 0;  // payload bytes this rank sent to other ranks
  // Ranks whose bucket held NaN or Inf, the same list on every rank: read
  // from the last slice's headers, which speak for the whole bucket.
  std::vector<int> nonfinite_ranks;
};

// Quantizes every piece of job.data with `e` (through `codec`, sized for
// the layout's longest piece and its slice count x world encodings) and
// trades the contributions. Runs on every rank in the same order.
Scattered scatter_encoded(ddph_comm_t* comm, const OwnEncoding& e, const ScatterJob& job,
                          const ScatterLayout& l, Codec& codec, ScratchBuffers& scratch);

}  // namespace quantization
}  // namespace ddph
