// Bit-exact parity with PyTorch, computed at test time by Debian's
// /usr/bin/python3 + torch (tests/support/torch_ref.h): the observers'
// calculate_qparams (MinMaxObserver per tensor, PerChannelMinMaxObserver on
// the hook's zero-padded (-1, 512) view), the quantization hook's own
// quantize/dequantize functions, and its rank-order aggregation loop.
// 4 and 2 bits: the same observers with quant_max 15 / 3 and the hook's
// expression with that clamp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/quant/kernels/quant_cpu.h"
#include "tests/quant/kernels_test_data.h"
#include "tests/support/torch_ref.h"

namespace {

namespace q = ddph::quantization;
using ddph_test::Blobs;
using ddph_test::from_blob;
using ddph_test::to_blob;

constexpr const char* kScript = R"PY(
import os, sys
import numpy as np
import torch
from torch import nn
import torch.distributed.algorithms.ddp_comm_hooks.quantization_hooks as qh

d = sys.argv[1]
torch.set_num_threads(1)
# torch >= 2.5 names these *_backend; 1.13 names them *_cuda (they run on CPU,
# except the per-channel dequantize, which moves its input with .cuda()).
qpt = getattr(qh, "_quantize_per_tensor_backend", None) or qh._quantize_per_tensor_cuda
dqpt = getattr(qh, "_dequantize_per_tensor_backend", None) or qh._dequantize_per_tensor_cuda
qpc = getattr(qh, "_quantize_per_channel_backend", None) or qh._quantize_per_channel_cuda
dqpc = getattr(qh, "_dequantize_per_channel_backend", None)
if dqpc is None:
    def dqpc(y, scale, zero_point):  # _dequantize_per_channel_cuda without .cuda()
        y = y.to(torch.float32)
        x = torch.zeros_like(y, device=y.device)
        for i in range(x.size()[0]):
            x[i, :] = scale[i] * (y[i, :] - zero_point[i])
        return x

def quantize_any(x, s, z, qmax):  # the hook's expression with another clamp
    return torch.clamp(torch.round(x / s) + z, 0, qmax).to(torch.uint8)

def per_tensor(t, qmax):
    obs = torch.ao.quantization.MinMaxObserver(quant_min=0, quant_max=qmax)
    obs(t)
    s, z = obs.calculate_qparams()
    sz = torch.FloatTensor([s, z])  # as quantization_pertensor_hook
    if qmax == 255:
        y = qpt(t, sz[0], sz[1])
        return sz[0:1], sz[1:2], y, dqpt(y, sz[0], sz[1])
    y = quantize_any(t, sz[0], sz[1], qmax)
    return sz[0:1], sz[1:2], y, dqpt(y, sz[0], sz[1])

def per_channel(t, ch, qmax):
    n = t.numel()
    # As quantization_perchannel_hook (which pads a whole extra channel when
    # n is a multiple of ch; that channel is cut off below).
    tc = nn.functional.pad(input=t, pad=(0, ch - n % ch), mode="constant", value=0).view(-1, ch)
    obs = torch.ao.quantization.PerChannelMinMaxObserver(quant_min=0, quant_max=qmax)
    obs(tc)
    s, z = obs.calculate_qparams()
    sz = torch.stack((s, z))
    if qmax == 255:
        y = qpc(tc, sz[0], sz[1])
    else:
        y = torch.stack([quantize_any(tc[i, :], sz[0][i], sz[1][i], qmax) for i in range(tc.size(0))])
    x = dqpc(y, sz[0], sz[1])
    k = max(1, (n + ch - 1) // ch)
    return sz[0][:k], sz[1][:k], y.flatten()[:n], x.flatten()[:n]

def save(name, t):
    t.contiguous().numpy().tofile(os.path.join(d, name))

for line in open(os.path.join(d, "meta")).read().split("\n"):
    if not line:
        continue
    i, n, ch, qmax = (int(v) for v in line.split())
    t = torch.from_numpy(np.fromfile(os.path.join(d, "x%d" % i), dtype=np.float32, count=n))
    ranks = [t, torch.flip(t, [0]) * -0.5]
    agg = torch.zeros_like(t)
    for r, tr in enumerate(ranks):
        s, z, y, x = per_tensor(tr, qmax) if ch == n else per_channel(tr, ch, qmax)
        if r == 0:
            save("s%d" % i, s); save("z%d" % i, z); save("q%d" % i, y); save("d%d" % i, x)
        agg += x  # dequantize_and_aggregate's loop, in rank order
    save("agg%d" % i, agg)
)PY";

struct Ours {
  std::vector<float> s, z, d, agg;
  std::vector<uint8_t> q;
};

Ours quantize_like_the_hook(const std::vector<float>& x, size_t channel, int qmax) {
  const size_t n = x.size();
  std::vector<float> reversed(x.rbegin(), x.rend());
  for (float& v : reversed) v *= -0.5f;
  const std::vector<float>& other = reversed;
  Ours o;
  o.agg.assign(n, 0.0f);
  for (const std::vector<float>* rank : {&x, &other}) {
    std::vector<q::QParams> params(q::num_channels(n, channel));
    std::vector<uint8_t> codes(n);
    q::QuantizeArgs a;
    a.x = rank->data();
    a.n = n;
    a.channel = channel;
    a.qmax = qmax;
    a.params = params.data();
    a.q = codes.data();
    EXPECT_TRUE(q::quantize_channels(a));
    q::dequantize_add(codes.data(), n, channel, params.data(), o.agg.data());
    if (rank == &x) {
      for (const auto& p : params) {
        o.s.push_back(p.scale);
        o.z.push_back(p.zero_point);
      }
      o.q = codes;
      o.d.resize(n);
      q::dequantize_into(codes.data(), n, channel, params.data(), o.d.data());
    }
  }
  return o;
}

template <class T>
void expect_bits_equal(const std::vector<T>& want, const std::vector<T>& got,
                       const std::string& what, const std::vector<float>& x) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0 && bad++ == 0) first = i;
  if (bad == 0) return;
  std::ostringstream msg;
  msg << what << ": " << bad << " of " << want.size() << " differ, first at " << first << ": torch "
      << +want[first] << " ours " << +got[first];
  if (first < x.size()) msg << " (x = " << x[first] << ")";
  ADD_FAILURE() << msg.str();
}

TEST(QuantTorchParity, ObserverQuantizeDequantizeAggregate) {
  if (!ddph_test::torch_available())
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (Debian python3-torch)";
  struct Run {
    std::string name;
    const ddph_test::QuantCase* c;
    int qmax;
  };
  const std::vector<ddph_test::QuantCase> cases = ddph_test::quant_cases();
  std::vector<Run> runs;
  for (const auto& c : cases)
    for (int qmax : {255, 15, 3})
      runs.push_back({c.name + " qmax " + std::to_string(qmax), &c, qmax});

  Blobs in;
  std::ostringstream meta;
  std::vector<std::string> outs;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& c = *runs[i].c;
    in["x" + std::to_string(i)] = to_blob(c.x);
    meta << i << ' ' << c.x.size() << ' ' << c.channel << ' ' << runs[i].qmax << '\n';
    for (const char* o : {"s", "z", "q", "d", "agg"}) outs.push_back(o + std::to_string(i));
  }
  const std::string m = meta.str();
  in["meta"] = std::vector<char>(m.begin(), m.end());
  const Blobs torch = ddph_test::run_torch(kScript, in, outs);

  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& c = *runs[i].c;
    const std::string k = std::to_string(i);
    const Ours o = quantize_like_the_hook(c.x, c.channel, runs[i].qmax);
    const std::string& name = runs[i].name;
    expect_bits_equal(from_blob<float>(torch.at("s" + k)), o.s, name + " scale", {});
    expect_bits_equal(from_blob<float>(torch.at("z" + k)), o.z, name + " zero_point", {});
    expect_bits_equal(from_blob<uint8_t>(torch.at("q" + k)), o.q, name + " codes", c.x);
    expect_bits_equal(from_blob<float>(torch.at("d" + k)), o.d, name + " dequantized", c.x);
    expect_bits_equal(from_blob<float>(torch.at("agg" + k)), o.agg, name + " aggregate", c.x);
  }
}

}  // namespace
