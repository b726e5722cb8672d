// Parity with PyTorch 1.13's own powerSGD_hook, run by Debian's python3-torch
// on 2 real Gloo processes (torch.distributed), on the gradients of three
// Linear(64, 64) layers with their biases, in two buckets, start_iter 2,
// 10 steps:
//  (a) error feedback off, 1 sample per rank: the summed weight gradients
//      have rank <= 2, so rank-2 PowerSGD must give the exact mean (computed
//      here in double) on both sides, whatever the random Q;
//  (b) the same initial Q on both sides (PyTorch: pre-filled
//      q_memory_dict/p_memory_dict; ddph: a checkpoint written from
//      docs/powersgd.md), or, without warm start, the same seed: outputs,
//      errors, P and Q match within fp32 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "plugins/powersgd/state.h"
#include "tests/powersgd/psgd_support.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#include "tests/support/torch_ref.h"

namespace {

using namespace ddph_test::psgd;
using ddph_test::Blobs;

constexpr int kWorld = 2, kSteps = 10, kStart = 2;
const std::vector<std::vector<Shape>> kBuckets = {{{64, 64}, {64}, {64, 64}, {64}},
                                                  {{64, 64}, {64}}};
// Number of compressed 64 x 64 matrices per bucket (biases stay uncompressed).
const int kMatrices[2] = {2, 1};

struct Variant {
  const char* name;
  int rank;
  bool warm, ef, batch_same_shape;
  int batch;     // samples per rank
  bool prefill;  // start from a chosen Q (warm start only)
  bool batched;  // batched_powersgd against batched_powerSGD_hook
  const char* hook() const { return batched ? "batched_powersgd" : "powersgd"; }
  std::string options() const {
    return "rank: " + std::to_string(rank) +
           ", start_iter: 2, warm_start: " + (warm ? "true" : "false") +
           ", error_feedback: " + (ef ? "true" : "false") +
           (batched ? ""
                    : std::string(", batch_same_shape: ") + (batch_same_shape ? "true" : "false"));
  }
};

const Variant kVariants[] = {
    {"exact_rank2_no_ef", 2, true, false, false, 1, false, false},
    {"warm_ef", 2, true, true, false, 16, true, false},
    {"warm_no_ef", 2, true, false, false, 16, true, false},
    {"cold_ef", 2, false, true, false, 16, false, false},
    {"cold_no_ef", 2, false, false, false, 16, false, false},
    {"warm_ef_batched_shapes", 2, true, true, true, 16, true, false},
    {"warm_ef_rank4_qr", 4, true, true, false, 16, true, false},
    {"seeded_rank1_batched_shapes", 1, true, true, true, 16, false, false},
    // PyTorch's batched hook with its one bug fixed in the script (2-D
    // matrices unsqueezed for _orthogonalize); the math is PyTorch's.
    {"batched_warm_ef", 1, true, true, false, 16, true, true},
    {"batched_cold_no_ef", 2, false, false, false, 16, false, true},
    {"batched_warm_ef_rank4_qr", 4, true, true, false, 16, true, true},
};
constexpr size_t kNumVariants = sizeof kVariants / sizeof kVariants[0];

const char* kScript = R"PY(
import math, os, sys
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps

d = sys.argv[1]
W, STEPS, START = (int(v) for v in np.fromfile(d + "/meta", dtype=np.int64))
variants = [l.split() for l in open(d + "/variants").read().splitlines()]
SHAPES = [[(64, 64), (64,), (64, 64), (64,)], [(64, 64), (64,)]]
SIZES = [sum(int(np.prod(s)) for s in b) for b in SHAPES]

class Bucket:  # the four methods powerSGD_hook calls on a dist.GradBucket
    def __init__(self, buf, index, last, shapes):
        self.buf, self.i, self.last, self.shapes = buf, index, last, shapes
    def buffer(self): return self.buf
    def index(self): return self.i
    def is_last(self): return self.last
    def gradients(self):
        out, at = [], 0
        for s in self.shapes:
            n = int(np.prod(s))
            out.append(self.buf[at:at + n].view(s))
            at += n
        return out

def gradients(batch):
    # Three Linear(64, 64) layers with ReLU between; each rank its own samples.
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 64) for _ in range(3)]
    g = np.zeros((STEPS, W, sum(SIZES)), dtype=np.float32)
    for step in range(STEPS):
        for rank in range(W):
            torch.manual_seed(1000 + 100 * step + rank + 7 * batch)
            x, y = torch.randn(batch, 64), torch.randn(batch, 64)
            for l in layers: l.zero_grad()
            h = x
            for i, l in enumerate(layers):
                h = l(h)
                if i < 2: h = torch.relu(h)
            ((h - y) ** 2).mean().backward()
            l1, l2, l3 = layers
            g[step, rank] = torch.cat([l3.weight.grad.flatten(), l3.bias.grad,
                                       l2.weight.grad.flatten(), l2.bias.grad,
                                       l1.weight.grad.flatten(), l1.bias.grad]).numpy()
    return g

# batched_powerSGD_hook hands _orthogonalize 2-D matrices where it asserts
# 3-D (PyTorch 1.13 and upstream); the fix is to add the batch dimension.
_orthogonalize = ps._orthogonalize
ps._orthogonalize = lambda m, epsilon=0: _orthogonalize(m.unsqueeze(0) if m.dim() == 2 else m, epsilon)

def worker(rank):
    dist.init_process_group("gloo", init_method="file://" + d + "/store", rank=rank, world_size=W)
    for v, (name, r, warm, ef, bss, batch, prefill, batched) in enumerate(variants):
        r, warm, ef, bss, batch, prefill = int(r), warm == "1", ef == "1", bss == "1", int(batch), prefill == "1"
        batched = batched == "1"
        hook = ps.batched_powerSGD_hook if batched else ps.powerSGD_hook
        g = np.fromfile(d + "/grads%d" % batch, dtype=np.float32).reshape(STEPS, W, -1)
        st = ps.PowerSGDState(None, matrix_approximation_rank=r, start_powerSGD_iter=START,
                              use_error_feedback=ef, warm_start=warm, random_seed=0,
                              batch_tensors_with_same_shape=bss)
        if prefill:
            for b in range(2):
                q0 = np.fromfile(d + "/q0_%d_%d" % (v, b), dtype=np.float32)
                q0 = torch.from_numpy(q0.copy())
                if batched: q0 = q0.view(-1, r)  # the batched hook keeps (side, r) matrices
                st.q_memory_dict[b] = q0
                st.p_memory_dict[b] = torch.zeros_like(q0)  # square matrices: |P| = |Q|
        outs, errs, pqs = [], [], []
        for step in range(STEPS):
            at = 0
            for b in range(2):
                buf = torch.from_numpy(g[step, rank, at:at + SIZES[b]].copy()).clone()  # resizable
                at += SIZES[b]
                out = hook(st, Bucket(buf, b, b == 1, SHAPES[b])).wait()
                outs.append(out.numpy().copy())
                e = st.error_dict.get(b)
                elen = math.ceil(math.sqrt(SIZES[b])) ** 2 if batched else SIZES[b]
                errs.append(e.numpy().copy() if e is not None else np.zeros(elen, np.float32))
                if warm and b in st.q_memory_dict and step >= START:
                    pqs.append(st.p_memory_dict[b].numpy().ravel().copy())
                    pqs.append(st.q_memory_dict[b].numpy().ravel().copy())
        np.concatenate(outs).astype(np.float32).tofile(d + "/out_%d_%d" % (v, rank))
        np.concatenate(errs).astype(np.float32).tofile(d + "/err_%d_%d" % (v, rank))
        (np.concatenate(pqs) if pqs else np.zeros(0)).astype(np.float32).tofile(d + "/pq_%d_%d" % (v, rank))
    dist.barrier()

if __name__ == "__main__":
    for batch in sorted({int(v[5]) for v in variants}):
        gradients(batch).tofile(d + "/grads%d" % batch)
    mp.spawn(worker, nprocs=W)
)PY";

constexpr int64_t kSize[2] = {2 * (64 * 64 + 64), 64 * 64 + 64};
constexpr int64_t kTotal = kSize[0] + kSize[1];
// The batched hook's square side for each bucket: ceil(sqrt(n)) = 92, 65.
constexpr int64_t kSide[2] = {92, 65};

// Elements of a bucket's error buffer (padded to side^2 when batched).
int64_t error_length(const Variant& x, int b) {
  return x.batched ? kSide[b] * kSide[b] : kSize[b];
}

// A chosen initial Q: smooth, full rank, different per bucket and variant.
std::vector<float> initial_q(size_t v, int bucket, int rank) {
  const Variant& x = kVariants[v];
  const int64_t rows = x.batched ? kSide[bucket] : kMatrices[bucket] * 64;
  std::vector<float> q(size_t(rows) * size_t(rank));
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = float(std::sin(0.37 * double(i + 1) + double(v) + 3.0 * bucket));
  return q;
}

// ctest runs each case as its own process; the reference is deterministic,
// so the first process to need it saves it under /tmp, keyed by a hash of
// the script and its inputs, and the others read it back.
Blobs cached_run_torch(const Blobs& in, const std::vector<std::string>& outs) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * 1099511628211ull;
  };
  mix(kScript, std::strlen(kScript));
  for (const auto& kv : in) {
    mix(kv.first.data(), kv.first.size());
    mix(kv.second.data(), kv.second.size());
  }
  char name[64];
  std::snprintf(name, sizeof name, "/tmp/ddph-psgd-torch-%016llx", (unsigned long long)h);
  const std::string dir = name;
  Blobs got;
  bool complete = true;
  for (const std::string& o : outs) {
    std::ifstream f(dir + "/" + o, std::ios::binary);
    if (!f) {
      complete = false;
      break;
    }
    got[o] = std::vector<char>(std::istreambuf_iterator<char>(f), {});
  }
  if (complete) return got;
  got = ddph_test::run_torch(kScript, in, outs);
  // Written to a private folder, then renamed into place: a reader sees all
  // of it or none.
  const std::string tmp = ddph_test::make_temp_dir("ddph-psgd-torch-new");
  for (const auto& kv : got)
    std::ofstream(tmp + "/" + kv.first, std::ios::binary)
        .write(kv.second.data(), std::streamsize(kv.second.size()));
  if (std::rename(tmp.c_str(), dir.c_str()) != 0) std::filesystem::remove_all(tmp);
  return got;
}

struct Reference {
  std::vector<float> grads[2];  // by batch size 1 / 16: steps x W x total
  std::vector<float> out[kNumVariants][kWorld], err[kNumVariants][kWorld], pq[kNumVariants];
};

const Reference& reference() {
  static Reference ref;
  static bool done = false;
  if (done) return ref;
  done = true;
  std::string variants;
  Blobs in;
  for (size_t v = 0; v < kNumVariants; ++v) {
    const Variant& x = kVariants[v];
    char line[160];
    std::snprintf(line, sizeof line, "%s %d %d %d %d %d %d %d\n", x.name, x.rank, x.warm, x.ef,
                  x.batch_same_shape, x.batch, x.prefill, x.batched);
    variants += line;
    if (x.prefill)
      for (int b = 0; b < 2; ++b)
        in["q0_" + std::to_string(v) + "_" + std::to_string(b)] =
            ddph_test::to_blob(initial_q(v, b, x.rank));
  }
  in["variants"] = std::vector<char>(variants.begin(), variants.end());
  in["meta"] = ddph_test::to_blob(std::vector<int64_t>{kWorld, kSteps, kStart});
  std::vector<std::string> outs = {"grads1", "grads16"};
  for (size_t v = 0; v < kNumVariants; ++v) {
    outs.push_back("pq_" + std::to_string(v) + "_0");
    for (int r = 0; r < kWorld; ++r) {
      outs.push_back("out_" + std::to_string(v) + "_" + std::to_string(r));
      outs.push_back("err_" + std::to_string(v) + "_" + std::to_string(r));
    }
  }
  Blobs got = cached_run_torch(in, outs);
  ref.grads[0] = ddph_test::from_blob<float>(got["grads1"]);
  ref.grads[1] = ddph_test::from_blob<float>(got["grads16"]);
  for (size_t v = 0; v < kNumVariants; ++v) {
    ref.pq[v] = ddph_test::from_blob<float>(got["pq_" + std::to_string(v) + "_0"]);
    for (int r = 0; r < kWorld; ++r) {
      ref.out[v][r] =
          ddph_test::from_blob<float>(got["out_" + std::to_string(v) + "_" + std::to_string(r)]);
      ref.err[v][r] =
          ddph_test::from_blob<float>(got["err_" + std::to_string(v) + "_" + std::to_string(r)]);
    }
  }
  return ref;
}

const float* grad(const Reference& ref, const Variant& x, int step, int rank) {
  return ref.grads[x.batch == 1 ? 0 : 1].data() + (size_t(step) * kWorld + size_t(rank)) * kTotal;
}

class TorchParity : public ::testing::TestWithParam<size_t> {};

TEST_P(TorchParity, MatchesPowerSGDHook) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "no torch in /usr/bin/python3";
  const size_t v = GetParam();
  const Variant& x = kVariants[v];
  const Reference& ref = reference();
  ASSERT_EQ(ref.out[v][0].size(), size_t(kSteps * kTotal)) << "reference output size";
  auto results = ddph_test::run_ranks(kWorld, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml(x.hook(), x.options()), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    if (x.prefill) {
      std::map<uint64_t, Memory> mem;
      for (int b = 0; b < 2; ++b) {
        mem[uint64_t(b)].q = initial_q(v, b, x.rank);
        mem[uint64_t(b)].p.assign(mem[uint64_t(b)].q.size(), 0.0f);
      }
      const std::string blob =
          session_blob(x.hook(), hook_blob_from_doc(x.batched ? 1 : 0, 0, 0, mem));
      ddph_error_t* e = ddph_session_load_state(s, blob.data(), blob.size());
      DDPH_CHILD_CHECK(e == nullptr, "load_state: %s", ddph_error_message(e));
    }
    double worst_out = 0, worst_err = 0, worst_pq = 0, worst_exact = 0, worst_torch_exact = 0;
    size_t pq_at = 0;
    for (int step = 0; step < kSteps; ++step) {
      int64_t at = 0;
      for (int b = 0; b < 2; ++b) {
        const float* g = grad(ref, x, step, rank) + at;
        std::vector<float> data(g, g + kSize[b]);
        DDPH_CHILD_CHECK(run_shaped(s, data, kBuckets[size_t(b)], uint64_t(b), uint64_t(step),
                                    b == 1) == DDPH_OK,
                         "step %d bucket %d", step, b);
        const size_t off = size_t(step) * kTotal + size_t(at);
        std::vector<float> want(ref.out[v][rank].begin() + off,
                                ref.out[v][rank].begin() + off + kSize[b]);
        worst_out = std::max(worst_out, max_rel_diff(data, want));
        // The exact mean, in double, from every rank's gradient.
        std::vector<float> mean(static_cast<size_t>(kSize[b]));
        for (int64_t i = 0; i < kSize[b]; ++i) {
          double sum = 0;
          for (int r = 0; r < world; ++r) sum += grad(ref, x, step, r)[at + i];
          mean[size_t(i)] = float(sum / world);
        }
        worst_exact = std::max(worst_exact, max_rel_diff(data, mean));
        worst_torch_exact = std::max(worst_torch_exact, max_rel_diff(want, mean));

        const ddph::powersgd::PsgdState st = [&] {
          const std::string hb = ddph_test::hook_blob(ddph_test::session_state(s));
          return ddph::powersgd::decode_state(hb.data(), hb.size(),
                                              x.batched ? ddph::powersgd::HookKind::kBatched
                                                        : ddph::powersgd::HookKind::kLayerwise);
        }();
        if (x.ef && step >= kStart) {
          const size_t eoff = size_t(step) * size_t(error_length(x, 0) + error_length(x, 1)) +
                              size_t(b == 1 ? error_length(x, 0) : 0);
          std::vector<float> want_err(ref.err[v][rank].begin() + eoff,
                                      ref.err[v][rank].begin() + eoff + error_length(x, b));
          worst_err = std::max(worst_err, max_rel_diff(st.buckets.at(uint64_t(b)).error, want_err));
        }
        if (x.warm && step >= kStart) {
          const auto& mem = st.buckets.at(uint64_t(b));
          for (const std::vector<float>* got : {&mem.p, &mem.q}) {
            DDPH_CHILD_CHECK(pq_at + got->size() <= ref.pq[v].size(), "reference P/Q too short");
            std::vector<float> want_pq(ref.pq[v].begin() + pq_at,
                                       ref.pq[v].begin() + pq_at + got->size());
            pq_at += got->size();
            worst_pq = std::max(worst_pq, max_rel_diff(*got, want_pq));
          }
        }
        at += kSize[b];
      }
    }
    std::fprintf(stderr,
                 "[rank %d] %s: max rel. diff to PyTorch: output %.3g, error %.3g, P/Q %.3g; "
                 "to the exact mean: ddph %.3g, PyTorch %.3g\n",
                 rank, x.name, worst_out, worst_err, worst_pq, worst_exact, worst_torch_exact);
    // Tolerances relative to the largest value of each bucket and step: fp32
    // rounding in two orders of summation (OpenBLAS and LAPACK here, torch's
    // kernels there), amplified by Gram-Schmidt where a rank-2 sum's second
    // singular value is small (the exact case).
    DDPH_CHILD_CHECK(worst_out < 1e-4, "%s: output differs from PyTorch by %g", x.name, worst_out);
    DDPH_CHILD_CHECK(worst_err < 1e-4, "%s: error differs from PyTorch by %g", x.name, worst_err);
    DDPH_CHILD_CHECK(worst_pq < 1e-4, "%s: P/Q differ from PyTorch by %g", x.name, worst_pq);
    if (std::string(x.name).rfind("exact", 0) == 0) {
      DDPH_CHILD_CHECK(worst_exact < 5e-5, "ddph is not the exact mean: %g", worst_exact);
      DDPH_CHILD_CHECK(worst_torch_exact < 5e-5, "PyTorch is not the exact mean: %g",
                       worst_torch_exact);
    } else {
      // Otherwise compression must have happened: not the exact mean.
      DDPH_CHILD_CHECK(worst_exact > 1e-2, "%s: suspiciously exact (%g)", x.name, worst_exact);
    }
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo2Ranks, TorchParity, ::testing::Range(size_t(0), kNumVariants),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return std::string(kVariants[i.param].name);
                         });

}  // namespace
