#!/usr/bin/env python3
"""Step time of torch.compile(ddp) against eager DDP, with the same ddph
hook, on the time-to-accuracy MLP (PyTorch 2; run by `ddph lab`, one
process per rank, each on its own shaped link):

    ddph lab --link 1gbit --world 2 -- build/python-torch-latest \\
        benchmarks/compiled_ddp_step.py --hooks ddph_allreduce,ddph_q8 --out runs.jsonl

For each hook, --rounds rounds of eager then compiled (inductor, the
default DDPOptimizer path), on the same processes: each run builds the
model from the seed, registers the hook, takes --warmup steps (compilation,
DDP's bucket rebuild) and times --steps steps of forward, backward (where
the hook runs) and SGD on Fashion-MNIST batches. A run's figure is the
median step of the slower rank; the table gives the median over rounds and
the compiled/eager ratio. Rank 0 appends one JSON line per run to --out.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch._dynamo
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "time_to_accuracy"))
import fashion_mnist  # noqa: E402
import hooks  # noqa: E402
import models  # noqa: E402


class UserModel(nn.Module):
    """The benchmark's model under a forward of the script's own: Dynamo
    compiles user code, not torch.nn's (DDP calls nn.Sequential from frames
    it does not trace)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)


def run(key, compiled, args, data, rank, world):
    torch._dynamo.reset()
    torch.manual_seed(args.seed)
    net = UserModel(models.MODELS[args.model]())
    ddp = DDP(net)
    handle = hooks.register(key, ddp, world)
    step = torch.compile(ddp) if compiled else ddp
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = data
    times = []
    for i in range(args.warmup + args.steps):
        lo = ((i * world + rank) * args.batch) % (len(y) - args.batch)
        xb, yb = x[lo:lo + args.batch], y[lo:lo + args.batch]
        dist.barrier()
        t0 = time.perf_counter()
        nn.functional.cross_entropy(step(xb), yb).backward()
        opt.step()
        opt.zero_grad()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    if handle is not None and hasattr(handle, "close"):
        handle.close()
    med = torch.tensor([statistics.median(times) * 1e3])
    dist.all_reduce(med, op=dist.ReduceOp.MAX)  # the slower rank sets the pace
    return med.item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--hooks", default="ddph_allreduce,ddph_q8",
                   help="comma-separated keys of time_to_accuracy/hooks.py")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSON lines, appended by rank 0")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = fashion_mnist.load("train")
    data = (torch.from_numpy(x), torch.from_numpy(y))
    table = {}
    for key in [k for k in args.hooks.split(",") if k]:
        for rnd in range(args.rounds):
            for compiled in (False, True):
                ms = run(key, compiled, args, data, rank, world)
                table.setdefault((key, compiled), []).append(ms)
                if rank == 0:
                    line = {"hook": key, "compiled": compiled, "round": rnd, "ms_per_step": ms,
                            "model": args.model, "world": world,
                            "link": os.environ.get("DDPH_LAB_LINK"), "torch": torch.__version__,
                            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
                    with open(args.out, "a") as f:
                        f.write(json.dumps(line) + "\n")
                    print("%-16s %-8s round %d  %.1f ms/step" %
                          (key, "compiled" if compiled else "eager", rnd, ms), flush=True)
    if rank == 0:
        print("\n| hook | link | world | eager ms/step | compiled ms/step | compiled / eager |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for key in dict.fromkeys(k for k, _ in table):
            e, c = statistics.median(table[(key, False)]), statistics.median(table[(key, True)])
            print("| %s | %s | %d | %.1f | %.1f | %.2f |" % (
                hooks.label(key), os.environ.get("DDPH_LAB_LINK"), world, e, c, c / e))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
