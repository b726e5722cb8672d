"""One rank of test_torch_fsdp.py (PyTorch 2; started WORLD times).

    fsdp_ranks.py RANK WORLD INIT_FILE OUT_DIR CASE[,CASE...]

Each case trains a model under fully_shard (each Linear, then the root) and
saves the full final parameters, the handle's stats or the error to
OUT_DIR/<case>.rank<R>.pt; the test compares. Cases are in CASES.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402
import ranks  # noqa: E402
import ddphooks.torch.fsdp  # noqa: E402
import ddphooks.torch.profiler  # noqa: E402

GLOO = {"backend": "gloo", "timeout": "60s"}


def config(family, name, options=None):
    return {"comm": GLOO, "hook": {"family": family, "name": name, "options": options or {}}}


# Sum, then divide, as ProcessGroupGloo's AVG under FSDP2's own reduce-scatter.
FP32 = config("default", "allreduce", {"divide": "after"})
Q8 = config("quantization", "per_channel", {"protocol": "reduce_scatter", "bits": 8})
S8 = config("quantization", "per_channel", {"protocol": "shard", "bits": 8})
S4EF = config("quantization", "per_channel", {"protocol": "shard", "bits": 4,
                                               "channel_size": 64, "error_feedback": True})
Q4EF = config("quantization", "per_channel", {"protocol": "reduce_scatter", "bits": 4,
                                               "channel_size": 64, "error_feedback": True})
W8 = config("quantization", "per_channel_gather", {"bits": 8})


class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def sharded(sizes, mp=None):
    torch.manual_seed(pr.SEED)
    model = MLP(sizes)
    kw = {"mp_policy": mp} if mp else {}
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def full_params(model):
    return torch.cat([p.full_tensor().detach().reshape(-1) for p in model.parameters()])


def train_random(rank, cfg, steps=pr.STEPS, resume=None):
    """The parity model's sizes and data (ranks on different batches), SGD."""
    model = sharded([pr.IN, pr.HIDDEN, pr.HIDDEN, pr.OUT])
    handle = ddphooks.torch.fsdp.compress(model, cfg) if cfg else None
    opt = torch.optim.SGD(model.parameters(), lr=pr.LR)
    for x, y in pr.batches(rank)[:steps]:
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    out = {"params": full_params(model)}
    if handle is not None:
        out["stats"] = handle.stats()
        handle.close()
    return out


def profiled(rank, cfg, trace_dir, weights=None):
    """A few steps under torch.profiler: the ddph ranges it exported."""
    import json
    model = sharded([pr.IN, pr.HIDDEN, pr.HIDDEN, pr.OUT])
    handle = ddphooks.torch.fsdp.compress(model, cfg, weights=weights)
    opt = torch.optim.SGD(model.parameters(), lr=pr.LR)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for x, y in pr.batches(rank)[:3]:
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    calls = handle.stats()["buckets"]
    gathers = handle.gathers
    path = os.path.join(trace_dir, "trace%s.rank%d.json" % ("_w" if weights else "", rank))
    # The narrowest clock mark (export aligns by it): how far the phases
    # may be placed off, in us, + the trace's 1 us rounding twice, + 20 us
    # for the profiler's clock rate against the wall clock's over the run.
    slack_us = min(m.uncertainty_ns for _, m in handle._clock_marks._marks) / 1e3 + 22.0
    ddphooks.torch.profiler.export_chrome_trace(prof, path, handle, rank=rank)
    handle.close()
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    names = [e["name"] for e in xs if e["name"].startswith("ddph ")]
    spans = lambda e: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))  # noqa: E731
    return {"calls": calls, "gathers": gathers, "ranges": names, "slack_us": slack_us,
            "range_times": sorted(spans(e) for e in xs if e["name"].startswith("ddph ")),
            "phases": [(e["name"], e["args"]["step"]) + spans(e) for e in xs
                       if e.get("cat") == "ddph" and e["name"].startswith("ddph/")]}


def checkpoint_case(rank, cfg, keep_state):
    """10 steps, a checkpoint (model, optimizer and the handle's state), then
    a fresh model, optimizer and handle loaded from it for the other 10."""
    batches = pr.batches(rank)
    model = sharded([pr.IN, pr.HIDDEN, pr.HIDDEN, pr.OUT])
    handle = ddphooks.torch.fsdp.compress(model, cfg)
    opt = torch.optim.SGD(model.parameters(), lr=pr.LR)
    for x, y in batches[:10]:
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    saved = {"model": {k: v.full_tensor() for k, v in model.state_dict().items()},
             "ddph": handle.state_dict()}
    handle.close()
    model = sharded([pr.IN, pr.HIDDEN, pr.HIDDEN, pr.OUT])
    handle = ddphooks.torch.fsdp.compress(model, cfg)
    with torch.no_grad():
        for k, p in model.state_dict().items():
            p.copy_(torch.distributed.tensor.distribute_tensor(saved["model"][k], p.device_mesh,
                                                                p.placements))
    if keep_state:
        handle.load_state_dict(saved["ddph"])
    opt = torch.optim.SGD(model.parameters(), lr=pr.LR)
    for x, y in batches[10:]:
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    handle.close()
    return {"params": full_params(model)}


def fake_quant(row, channel, bits):
    """PyTorch's quint8 affine per-channel quantize-dequantize of a 1-D
    float32 row in channels of `channel` elements, the last one shorter
    where the row is not whole channels (PerChannelMinMaxObserver's scale
    and zero point, quantize_per_channel's rounding), in torch ops."""
    qmax = float((1 << bits) - 1)
    out = []
    for x in torch.split(row, channel):
        min_neg, max_pos = x.min().clamp(max=0), x.max().clamp(min=0)
        scale = ((max_pos - min_neg) / qmax).clamp(min=torch.finfo(torch.float32).eps)
        zp = (0 - torch.round(min_neg / scale)).clamp(0, qmax)
        q = (torch.round(x / scale) + zp).clamp(0, qmax)
        out.append(scale * (q - zp))
    return torch.cat(out)


def gathered_linear(weight, bias, world, channel, bits):
    """What every rank should compute with for a Linear under fully_shard
    with the weight hook, from its full fp32 parameters: rank r's row is its
    dim-0 chunk of the weight then of the bias, each zero-padded to the
    first chunk's length (FSDP2's padded shard), quantized on its own."""
    out, cols = weight.shape
    k = -(-out // world)
    ws, bs = [], []
    for r in range(world):
        w = torch.zeros(k, cols)
        b = torch.zeros(k)
        w[:len(weight[r * k:(r + 1) * k])] = weight[r * k:(r + 1) * k]
        b[:len(bias[r * k:(r + 1) * k])] = bias[r * k:(r + 1) * k]
        q = fake_quant(torch.cat([w.reshape(-1), b]), channel, bits)
        ws.append(q[:k * cols].view(k, cols))
        bs.append(q[k * cols:])
    return torch.cat(ws)[:out], torch.cat(bs)[:out]


def count_fsdp_all_gathers():
    """Counts FSDP2's all-gathers, whatever serves them: a wrapper of the
    function every FSDP param group's unshard calls."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as pg
    counter = {"n": 0}
    original = pg.foreach_all_gather

    def counted(*a, **kw):
        counter["n"] += 1
        return original(*a, **kw)
    pg.foreach_all_gather = counted
    return counter, lambda: setattr(pg, "foreach_all_gather", original)


def gathered_weights(rank, world, grads, weights, bits=8, channel=512):
    """The parity model with the weight hook: the weights each layer
    computes with in the last step's forward (read in a forward pre-hook,
    after FSDP's unshard), what they should be from the full fp32 parameters
    before that step, and the all-gathers FSDP made against those the hook
    served."""
    model = sharded([pr.IN, pr.HIDDEN, pr.HIDDEN, pr.OUT])
    counter, restore = count_fsdp_all_gathers()
    handle = ddphooks.torch.fsdp.compress(model, grads, weights=weights)
    opt = torch.optim.SGD(model.parameters(), lr=pr.LR)
    seen, expected = [], []

    def record(layer, args):
        seen.append(torch.cat([layer.weight.detach().reshape(-1), layer.bias.detach()]))
    batches = pr.batches(rank)
    for i, (x, y) in enumerate(batches):
        hooks = []
        if i == len(batches) - 1:
            for layer in model.layers:
                w, b = gathered_linear(layer.weight.full_tensor(), layer.bias.full_tensor(),
                                       world, channel, bits)
                expected.append(torch.cat([w.reshape(-1), b]))
                hooks.append(layer.register_forward_pre_hook(record))
        nn.functional.mse_loss(model(x), y).backward()
        for h in hooks:
            h.remove()
        opt.step()
        opt.zero_grad()
    restore()
    out = {"params": full_params(model), "seen": seen, "expected": expected,
           "fsdp_gathers": counter["n"], "hook_gathers": handle.gathers,
           "weight_stats": handle.weight_stats(), "stats": handle.stats()}
    handle.close()
    return out


MNIST_STEPS, MNIST_BATCH = 300, 32


def fashion_mnist_accuracy(rank, world, cfg, weights=None):
    """A 784-128-10 MLP, SGD with momentum, MNIST_STEPS steps of
    MNIST_BATCH images per rank (rank r takes every world-th batch), then
    the accuracy on the 10,000 test images."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "time_to_accuracy"))
    import fashion_mnist
    x, y = (torch.from_numpy(a) for a in fashion_mnist.load("train"))
    tx, ty = (torch.from_numpy(a) for a in fashion_mnist.load("test"))
    x, tx = x.reshape(len(x), -1), tx.reshape(len(tx), -1)
    model = sharded([784, 128, 10])
    handle = ddphooks.torch.fsdp.compress(model, cfg, weights=weights) if cfg else None
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for i in range(MNIST_STEPS):
        lo = (i * world + rank) * MNIST_BATCH % (len(y) - MNIST_BATCH)
        nn.functional.cross_entropy(model(x[lo:lo + MNIST_BATCH]), y[lo:lo + MNIST_BATCH]).backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        accuracy = (model(tx).argmax(1) == ty).float().mean().item()
    if handle is not None:
        handle.close()
    return {"accuracy": accuracy, "params": full_params(model)}


def refusal(make):
    try:
        make()
    except ddphooks.errors.DDPHError as e:
        return {"refused": str(e)}
    return {"accepted": True}


def bf16_reduce():
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    return ddphooks.torch.fsdp.compress(sharded([8, 8], mp), FP32)


def bf16_weights():
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return ddphooks.torch.fsdp.compress(sharded([8, 8], mp), FP32, weights=W8)


CASES = {
    "mnist_s8w8": lambda r: fashion_mnist_accuracy(r, dist.get_world_size(), S8, W8),
    "gather_w8": lambda r: gathered_weights(r, dist.get_world_size(), S8, W8),
    "gather_w4": lambda r: gathered_weights(
        r, dist.get_world_size(), FP32,
        config("quantization", "per_channel_gather", {"bits": 4, "channel_size": 64}), 4, 64),
    "refuse_weights_bf16": lambda r: refusal(bf16_weights),
    "refuse_weights_not_gather": lambda r: refusal(lambda: ddphooks.torch.fsdp.compress(
        sharded([8, 8]), FP32, weights=S8)),
    "refuse_gather_for_grads": lambda r: refusal(lambda: ddphooks.torch.fsdp.compress(
        sharded([8, 8]), W8)),
    "mnist_fp32": lambda r: fashion_mnist_accuracy(r, dist.get_world_size(), None),
    "mnist_q8": lambda r: fashion_mnist_accuracy(r, dist.get_world_size(), Q8),
    "mnist_q4ef": lambda r: fashion_mnist_accuracy(r, dist.get_world_size(), Q4EF),
    "mnist_s8": lambda r: fashion_mnist_accuracy(r, dist.get_world_size(), S8),
    "mnist_s4ef": lambda r: fashion_mnist_accuracy(r, dist.get_world_size(), S4EF),
    "own_fp32": lambda r: train_random(r, None),
    "ddph_fp32": lambda r: train_random(r, FP32),
    "ddph_q8": lambda r: train_random(r, Q8),
    "ddph_q4ef": lambda r: train_random(r, Q4EF),
    "ddph_s8": lambda r: train_random(r, S8),
    "ddph_s4ef": lambda r: train_random(r, S4EF),
    "profiled_s8": lambda r: profiled(r, S8, sys.argv[4]),
    "profiled_s8w8": lambda r: profiled(r, S8, sys.argv[4], W8),
    "resume_q4ef": lambda r: checkpoint_case(r, Q4EF, keep_state=True),
    "resume_q4ef_without_state": lambda r: checkpoint_case(r, Q4EF, keep_state=False),
    "refuse_bf16_reduce": lambda r: refusal(bf16_reduce),
    "refuse_powersgd": lambda r: refusal(lambda: ddphooks.torch.fsdp.compress(
        sharded([8, 8]), config("powersgd", "powersgd", {"rank": 1}))),
    "refuse_plain_model": lambda r: refusal(lambda: ddphooks.torch.fsdp.compress(
        MLP([8, 8]), FP32)),
}


if __name__ == "__main__":
    ranks.run_cases({name: CASES[name] for name in sys.argv[5].split(",")}, sys.argv)
