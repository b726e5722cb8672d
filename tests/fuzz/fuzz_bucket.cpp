// Adversarial buckets through ddph_session_submit: struct sizes, NULL data,
// dimensions that are negative or overflow, strides, dtypes, devices,
// parameter views outside the buffer. Each is run or refused with an error.
// Memory is always as large as the bucket claims when the claim is small,
// so anything ASan reports is the library reading what it should have
// refused, not the fuzzer lying about its buffers.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_session.h"

namespace {

// Never destroyed (nor closed): reachable for LeakSanitizer's check at exit.
std::vector<ddph_session_t*>& sessions() {
  static auto& s = *new std::vector<ddph_session_t*>(ddph_fuzz::open_sessions({
      "{family: default, name: allreduce}",
      "{family: default, name: fp16_compress}",
      "{family: quantization, name: per_channel, options: {protocol: reduce_scatter, channel_size: "
      "16}}",
      "{family: quantization, name: per_tensor, options: {bits: 2}}",
      "{family: powersgd, name: powersgd, options: {rank: 2, start_iter: 0, error_feedback: "
      "false, warm_start: false}}",
      "{family: powersgd, name: batched_powersgd, options: {start_iter: 0, error_feedback: false, "
      "warm_start: false}}",
      "{family: post_localsgd, name: model_averaging, options: {period: 1}, wrap: {family: "
      "debugging, name: noop}}",
  }));
  return s;
}

class Bytes {
 public:
  Bytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

// A dimension: mostly small, sometimes 0, negative or huge (huge values
// overflow any product or byte count, so they must be refused).
int64_t dim(Bytes& in) {
  const uint8_t b = in.u8();
  if (b < 200) return b % 40;
  if (b < 230) return -int64_t(b - 199);
  return std::numeric_limits<int64_t>::max() - (b - 230);
}

size_t claimed(const int64_t* shape, int32_t ndim) {
  __int128 n = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return 0;
    n *= shape[i];
    if (n > (1 << 20)) return 0;
  }
  return size_t(n);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sessions();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  ddph_session_t* s = sessions()[in.u8() % sessions().size()];
  // The struct with room past it, so a large struct_size is not a lie.
  struct {
    ddph_bucket_t b;
    char room[256];
  } holder{};
  ddph_bucket_t& b = holder.b;
  const uint8_t size_choice = in.u8() % 5;
  b.struct_size = size_choice == 0   ? 0
                  : size_choice == 1 ? 8
                  : size_choice == 2 ? sizeof b - 8
                  : size_choice == 3 ? sizeof b + 64
                                     : sizeof b;
  b.index = in.u8() % 4;
  b.step = in.u8();
  b.is_last = in.u8() & 1;

  int64_t shape[4];
  b.buffer.ndim = int32_t(in.u8() % 6) - 1;  // -1 .. 4
  for (int i = 0; i < 4; ++i) shape[i] = dim(in);
  b.buffer.shape = (in.u8() & 7) == 0 ? nullptr : shape;
  int64_t strides[4] = {1, 1, 1, 1};
  if ((in.u8() & 7) == 0) {
    strides[0] = int64_t(in.u8()) - 2;
    b.buffer.strides = strides;
  }
  const uint8_t dt = in.u8();
  const DLDataType dtypes[] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1},
                               {kDLFloat, 64, 1}, {kDLInt, 32, 1},   {kDLFloat, 32, 4},
                               {kDLFloat, 0, 1},  {kDLUInt, 8, 1},   {kDLComplex, 64, 1}};
  b.buffer.dtype = dtypes[dt % (sizeof dtypes / sizeof dtypes[0])];
  // A device no hook reaches, for the refusal path. Never kDLCUDA: every
  // hook now has a CUDA path and would hand this host buffer to kernels as
  // device memory, which a GPU machine cannot survive (the ABI trusts the
  // label; only the staging communicators check it).
  b.buffer.device = {(in.u8() & 15) == 0 ? kDLOpenCL : kDLCPU, 0};
  const size_t bits =
      size_t(b.buffer.dtype.bits) * (b.buffer.dtype.lanes ? b.buffer.dtype.lanes : 1);
  const size_t n = b.buffer.ndim >= 0 && b.buffer.shape ? claimed(shape, b.buffer.ndim) : 0;
  std::vector<uint8_t> buffer(n * (bits + 7) / 8 + 64, 0x3c);
  b.buffer.data = (in.u8() & 15) == 0 ? nullptr : buffer.data();
  b.buffer.byte_offset = (in.u8() & 15) == 0 ? 8 : 0;

  ddph_param_t params[3];
  int64_t pshape[3][3];
  std::vector<std::vector<float>> pdata(3);
  const uint8_t np = in.u8() % 4;
  for (int k = 0; k < 3; ++k) {
    ddph_param_t& p = params[k];
    p = ddph_param_t{};
    p.struct_size = (in.u8() & 15) == 0 ? 4 : sizeof p;
    const uint8_t o = in.u8();
    p.offset = o < 240 ? int64_t(o) : (o < 250 ? -1 : std::numeric_limits<int64_t>::max());
    p.ndim = int32_t(in.u8() % 4) - (in.u8() == 255 ? 40 : 0);
    for (int i = 0; i < 3; ++i) pshape[k][i] = dim(in);
    p.shape = (in.u8() & 15) == 0 ? nullptr : pshape[k];
    const size_t pn = p.ndim >= 0 && p.shape ? claimed(pshape[k], std::min(p.ndim, 3)) : 0;
    if (in.u8() & 1) {
      pdata[k].assign(pn + 1, 1.0f);
      p.data.data = pdata[k].data();
      p.data.device = {kDLCPU, 0};
      p.data.dtype = {kDLFloat, 32, 1};
      p.data.ndim = std::min(std::max(p.ndim, 0), 3);
      p.data.shape = pshape[k];
    }
  }
  b.num_params = np;
  b.params = np != 0 && (in.u8() & 15) == 0 ? nullptr : params;
  (void)ddph_fuzz::run(s, &b);
  return 0;
}
