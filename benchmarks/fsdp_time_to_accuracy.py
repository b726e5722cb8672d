#!/usr/bin/env python3
"""FSDP2 on Fashion-MNIST with its own fp32 reduce-scatter and with ddph's
quantized one (ddphooks.torch.fsdp.compress), and with quantized weight
all-gathers too (runs ending in w8/w4: compress's weights=), each in turn on
the same processes; PyTorch 2, one process per rank, run by `ddph lab`:

    ddph lab --link 1gbit --world 2 -- build/python-torch-latest \\
        benchmarks/fsdp_time_to_accuracy.py --runs own,ddph_q8 --out runs.jsonl

The time-to-accuracy MLP (784-1024-1024-10) under fully_shard (each Linear,
then the root), SGD with momentum, --batch images per rank, rank r on its
own shard of the training set. Every --eval-every steps the clock stops and
the test accuracy is taken on --eval-images test images. Rank 0 appends one
JSON line per run to --out and prints a table: ms/step, the seconds to
--target, the final accuracy, and the bytes this rank's card sent per step.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "time_to_accuracy"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import fashion_mnist  # noqa: E402
import ddphooks.torch.fsdp  # noqa: E402
from train_rank import tx_bytes  # noqa: E402

GLOO = {"backend": "gloo", "timeout": "120s"}
RUNS = {
    "own": ("FSDP2's own fp32 reduce-scatter", None),
    "ddph_q8": ("ddph quantization 8-bit", {"comm": GLOO, "hook": {
        "family": "quantization", "name": "per_channel",
        "options": {"protocol": "reduce_scatter", "bits": 8, "channel_size": 512}}}),
    "ddph_s8": ("ddph quantization 8-bit, protocol shard", {"comm": GLOO, "hook": {
        "family": "quantization", "name": "per_channel",
        "options": {"protocol": "shard", "bits": 8, "channel_size": 512}}}),
    "ddph_s4ef": ("ddph quantization 4-bit + EF, protocol shard", {"comm": GLOO, "hook": {
        "family": "quantization", "name": "per_channel",
        "options": {"protocol": "shard", "bits": 4, "channel_size": 64,
                    "error_feedback": True}}}),
    "ddph_q4ef": ("ddph quantization 4-bit + EF", {"comm": GLOO, "hook": {
        "family": "quantization", "name": "per_channel",
        "options": {"protocol": "reduce_scatter", "bits": 4, "channel_size": 64,
                    "error_feedback": True}}}),
}
# Weight all-gathers (compress's weights=): per_channel_gather.
WEIGHTS = {
    8: {"comm": GLOO, "hook": {"family": "quantization", "name": "per_channel_gather",
                               "options": {"bits": 8, "channel_size": 512}}},
    4: {"comm": GLOO, "hook": {"family": "quantization", "name": "per_channel_gather",
                               "options": {"bits": 4, "channel_size": 64}}},
}
RUNS["ddph_s8w8"] = ("ddph 8-bit grads (shard) + 8-bit weights", RUNS["ddph_s8"][1], WEIGHTS[8])
RUNS["ddph_s8w4"] = ("ddph 8-bit grads (shard) + 4-bit weights", RUNS["ddph_s8"][1], WEIGHTS[4])
RUNS["ddph_s4efw4"] = ("ddph 4-bit + EF grads (shard) + 4-bit weights", RUNS["ddph_s4ef"][1],
                       WEIGHTS[4])


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(784, 1024), nn.Linear(1024, 1024),
                                     nn.Linear(1024, 10)])

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def run(key, args, data, rank, world):
    torch.manual_seed(args.seed)
    model = MLP()
    for layer in model.layers:
        fully_shard(layer, reshard_after_forward=args.reshard)
    fully_shard(model, reshard_after_forward=args.reshard)
    weights = RUNS[key][2] if len(RUNS[key]) > 2 else None
    handle = ddphooks.torch.fsdp.compress(model, RUNS[key][1],
                                          weights=weights) if RUNS[key][1] else None
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    (x, y), (tx, ty) = data
    tx, ty = tx[:args.eval_images], ty[:args.eval_images]
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(y), generator=g)[rank::world]
    curve, times, train_secs, sent = [], [], 0.0, 0
    hook_secs = {"grads": 0.0, "weights": 0.0}

    def take_hook_seconds(keep):
        """The hooks' seconds since the last call (training steps; an
        evaluation's all-gathers are dropped)."""
        if handle is None:
            return
        for part, session in (("grads", handle.session), ("weights", handle.weights)):
            if session is not None:
                secs = sum(m.hook_seconds for m in session.metrics())
                hook_secs[part] += secs if keep else 0.0
    dist.barrier()
    for step in range(1, args.steps + 1):
        idx = order[((step - 1) * args.batch) % (len(order) - args.batch):][:args.batch]
        b0 = tx_bytes(args.interface)
        t0 = time.perf_counter()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
        opt.zero_grad()
        dt = time.perf_counter() - t0
        b1 = tx_bytes(args.interface)
        train_secs += dt
        times.append(dt)
        if b0 is not None and b1 is not None:
            sent += b1 - b0
        if step % args.eval_every == 0 or step == args.steps:
            take_hook_seconds(keep=True)
            curve.append((step, train_secs, accuracy(model, tx, ty)))
            dist.barrier()
            take_hook_seconds(keep=False)
    if handle is not None:
        handle.close()
    secs_to_target = None
    prev = (0, 0.0, 0.0)
    for s, t, a in curve:
        if a >= args.target:
            frac = (args.target - prev[2]) / (a - prev[2]) if a > prev[2] else 1.0
            secs_to_target = prev[1] + frac * (t - prev[1])
            break
        prev = (s, t, a)
    ms = torch.tensor([statistics.median(times[5:]) * 1e3])
    dist.all_reduce(ms, op=dist.ReduceOp.MAX)
    return {"run": key, "label": RUNS[key][0], "ms_per_step": ms.item(),
            "secs_to_target": secs_to_target, "final_accuracy": curve[-1][2], "curve": curve,
            "sent_mb_per_step": sent / args.steps / 1e6,
            # rank 0's hooks, ms per training step (the session's worker)
            "grad_hook_ms_per_step": hook_secs["grads"] / args.steps * 1e3,
            "weight_hook_ms_per_step": hook_secs["weights"] / args.steps * 1e3}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default="own,ddph_q8,ddph_q4ef")
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", type=float, default=0.85)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-images", type=int, default=5000)
    p.add_argument("--reshard", type=int, default=1,
                   help="fully_shard's reshard_after_forward (1: gather the weights again "
                        "for the backward)")
    p.add_argument("--interface", default=os.environ.get("GLOO_SOCKET_IFNAME", "ddph0"))
    p.add_argument("--out", required=True)
    args = p.parse_args()
    args.reshard = bool(args.reshard)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    data = tuple(tuple(torch.from_numpy(a) for a in fashion_mnist.load(s))
                 for s in ("train", "test"))
    rows = []
    for key in [k for k in args.runs.split(",") if k]:
        r = run(key, args, data, rank, world)
        r.update(world=world, link=os.environ.get("DDPH_LAB_LINK"), torch=torch.__version__,
                 steps=args.steps, batch=args.batch, target=args.target, seed=args.seed,
                 reshard_after_forward=args.reshard)
        rows.append(r)
        if rank == 0:
            with open(args.out, "a") as f:
                f.write(json.dumps(r) + "\n")
    if rank == 0:
        own = next((r for r in rows if r["run"] == "own"), None)
        print("| run | world | link | ms/step | to %.0f%% (s) | / own | final accuracy | "
              "MB sent/step (rank 0) |" % (100 * args.target))
        print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            t = r["secs_to_target"]
            ratio = "%.2f" % (t / own["secs_to_target"]) if (
                own and t and own["secs_to_target"]) else "-"
            print("| %s | %d | %s | %.1f | %s | %s | %.2f%% | %.2f |" % (
                r["label"], world, r["link"], r["ms_per_step"],
                "%.1f" % t if t else "not reached", ratio, 100 * r["final_accuracy"],
                r["sent_mb_per_step"]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
