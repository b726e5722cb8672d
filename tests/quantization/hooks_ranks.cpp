#include "tests/quantization/hooks_ranks.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace ddph_test {
namespace quant {

float input(int rank, uint64_t step, size_t i) {
  uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(rank + 1) * 40503u ^ uint32_t(step) * 97u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  const float u = float(x % 1000003u) / 1000003.0f * 4.0f - 2.0f;  // [-2, 2)
  if (i >= 1024 && i < 1536) return -std::fabs(u) - 0.5f;
  if (i >= 2048 && i < 2560) return 0.25f * float(rank + 1);
  return u * float(rank + 1) * 0.5f + 0.1f * float(rank);  // a different scale per rank
}

std::vector<float> inputs(int rank, uint64_t step, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(rank, step, i);
  return v;
}

std::string yaml(const std::string& hook, const std::string& options) {
  return "comm: {backend: gloo, timeout: 20s}\nhook: {family: quantization, name: " + hook +
         ", options: {" + options + "}}\n";
}

std::string Config::options() const {
  return std::string("protocol: ") + protocol + ", bits: " + std::to_string(bits) +
         ", rounding: " + rounding;
}

std::string Config::name() const {
  return std::string(hook) + "/" + protocol + "/" + std::to_string(bits) + "bit/" + rounding;
}

std::vector<double> error_bound(const Config& c, int world, size_t n) {
  const bool per_channel = std::string(c.hook) == "per_channel";
  const size_t ch = per_channel ? kChannel : n;
  const double qmax = double((1 << c.bits) - 1);
  // Nearest rounding errs by at most half a step, stochastic by under one.
  const double f = std::string(c.rounding) == "nearest" ? 0.5 : 1.0;
  std::vector<double> bound(n);
  for (size_t b = 0; b < n; b += ch) {
    const size_t e = std::min(n, b + ch);
    double sum_scale = 0, max_scale = 0, lo = 0, hi = 0;
    for (int r = 0; r < world; ++r) {
      double mn = 0, mx = 0;  // MinMaxObserver: min(min, 0), max(max, 0)
      for (size_t i = b; i < e; ++i) {
        mn = std::min(mn, double(input(r, 0, i)));
        mx = std::max(mx, double(input(r, 0, i)));
      }
      const double scale = std::max((mx - mn) / qmax, double(FLT_EPSILON));
      sum_scale += scale;
      max_scale = std::max(max_scale, scale);
      lo = std::min(lo, mn);
      hi = std::max(hi, mx);
    }
    double bd = f * sum_scale / world;
    if (std::string(c.protocol) == "reduce_scatter") {
      // The owner re-quantizes the mean (nearest); its range lies within the
      // ranks' joint range widened by the first quantization's error. A
      // per_tensor chunk's scale is at most the whole bucket's.
      bd += 0.5 * std::max((hi - lo + 2 * f * max_scale) / qmax, double(FLT_EPSILON));
    }
    for (size_t i = b; i < e; ++i) bound[i] = bd + 1e-5 * (1 + std::max(hi, -lo));
  }
  return bound;
}

namespace {

const char* kTorchScript = R"PY(
import sys
import numpy as np
import torch
from torch.ao.quantization import MinMaxObserver, PerChannelMinMaxObserver
from torch.distributed.algorithms.ddp_comm_hooks.quantization_hooks import (
    _quantize_per_tensor_cuda, _dequantize_per_tensor_cuda, _quantize_per_channel_cuda)

d = sys.argv[1]
W, n, c = (int(v) for v in np.fromfile(d + "/meta", dtype=np.int64))
x = torch.from_numpy(np.fromfile(d + "/x", dtype=np.float32).reshape(W, n))

# quantization_pertensor_hook, each rank's steps as the hook runs them.
sz = []
for r in range(W):
    obs = MinMaxObserver()
    obs(x[r])
    s, z = obs.calculate_qparams()
    sz.append(torch.FloatTensor([s, z]))
qs = [_quantize_per_tensor_cuda(x[r], sz[r][0], sz[r][1]) for r in range(W)]
agg = torch.zeros_like(qs[0], dtype=torch.float32)
for r in range(W):
    agg += _dequantize_per_tensor_cuda(qs[r], sz[r][0], sz[r][1])
(agg / W).numpy().tofile(d + "/per_tensor")

# quantization_perchannel_hook; its _dequantize_per_channel_cuda moves to
# CUDA, so its per-row formula is written out here.
chans = [torch.nn.functional.pad(input=x[r], pad=(0, c - n % c), mode="constant", value=0)
         .view(-1, c) for r in range(W)]
sz = []
for r in range(W):
    obs = PerChannelMinMaxObserver()
    obs(chans[r])
    s, z = obs.calculate_qparams()
    sz.append(torch.stack((s, z)))
qs = [_quantize_per_channel_cuda(chans[r], sz[r][0, :], sz[r][1, :]) for r in range(W)]
agg = torch.zeros_like(qs[0], dtype=torch.float32)
for r in range(W):
    y = qs[r].to(torch.float32)
    deq = torch.zeros_like(y)
    for i in range(y.size()[0]):
        deq[i, :] = sz[r][0][i] * (y[i, :] - sz[r][1][i])
    agg += deq
(torch.flatten(agg)[:n] / W).numpy().tofile(d + "/per_channel")
)PY";

}  // namespace

const std::vector<float>& torch_reference(int world, size_t n, bool per_channel) {
  static std::map<std::pair<int, size_t>, std::pair<std::vector<float>, std::vector<float>>> cache;
  static const std::vector<float> none;
  if (!torch_available()) return none;
  auto key = std::make_pair(world, n);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<float> x;
    for (int r = 0; r < world; ++r) {
      std::vector<float> v = inputs(r, 0, n);
      x.insert(x.end(), v.begin(), v.end());
    }
    std::vector<int64_t> meta = {world, int64_t(n), int64_t(kChannel)};
    Blobs out = run_torch(kTorchScript, {{"x", to_blob(x)}, {"meta", to_blob(meta)}},
                          {"per_tensor", "per_channel"});
    it = cache
             .emplace(key, std::make_pair(from_blob<float>(out["per_tensor"]),
                                          from_blob<float>(out["per_channel"])))
             .first;
  }
  return per_channel ? it->second.second : it->second.first;
}

uint64_t settled_wire_bytes(ddph_session_t* s) {
  ddph_comm_t* c = ddph_session_comm(s);
  if (ddph_error_t* e = c->barrier(c->ctx)) {
    std::fprintf(stderr, "barrier: %s\n", ddph_error_message(e));
    ddph_error_free(e);
  }
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ddph_error_free(ddph_session_stats(s, &st));
  return st.wire_bytes;
}

bool all_ranks_true(ddph_session_t* s, bool mine) {
  ddph_comm_t* c = ddph_session_comm(s);
  const int world = c->size(c->ctx);
  int32_t flag = mine ? 1 : 0;
  std::vector<int32_t> all(size_t(world), 0);
  int64_t one = 1, many = world;
  DLTensor send{&flag, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &one, nullptr, 0};
  DLTensor recv{all.data(), {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &many, nullptr, 0};
  if (ddph_error_t* e = c->allgather(c->ctx, &send, &recv, nullptr)) {
    std::fprintf(stderr, "allgather: %s\n", ddph_error_message(e));
    ddph_error_free(e);
    return false;
  }
  return std::all_of(all.begin(), all.end(), [](int32_t v) { return v != 0; });
}

ddph_code_t run_bucket_msg(ddph_session_t* s, std::vector<float>& data, uint64_t index,
                           uint64_t step, std::string* message) {
  FloatBucket b(data, index, step, true);
  std::string text;
  const ddph_code_t code = run_bucket(s, b.bucket, &text);
  if (message != nullptr) *message = text;
  return code;
}

}  // namespace quant
}  // namespace ddph_test
