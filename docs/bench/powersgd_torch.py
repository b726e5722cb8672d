#!/usr/bin/python3
"""Times PyTorch 1.13's own hooks on the model `ddph bench --matrix` builds:
one bucket of K ROWS x COLS gradient matrices, W ranks over Gloo (CPU),
one thread per rank. Prints one JSON object per hook, like `ddph bench
--json`: median over iterations of the slowest rank's time.

  /usr/bin/python3 docs/bench/powersgd_torch.py [--world 2] [--matrices 25]
      [--rows 1024] [--cols 1024] [--iters 5] [--warmup 3]
"""
import argparse
import json
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps


class Bucket:
    """The methods the hooks call on a dist.GradBucket."""

    def __init__(self, buf, shapes):
        self.buf, self.shapes = buf, shapes

    def buffer(self):
        return self.buf

    def index(self):
        return 0

    def is_last(self):
        return True

    def gradients(self):
        out, at = [], 0
        for s in self.shapes:
            n = s[0] * s[1]
            out.append(self.buf[at:at + n].view(s))
            at += n
        return out


def worker(rank, a, store, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=a.world)
    shapes = [(a.rows, a.cols)] * a.matrices
    n = a.rows * a.cols * a.matrices
    g = torch.Generator().manual_seed(rank)
    pristine = torch.rand(n, generator=g) * 2 - 1
    hooks = [("allreduce_hook", None, lambda st, b: default_hooks.allreduce_hook(dist.group.WORLD, b))]
    for r in (1, 4):
        hooks.append(("powerSGD_hook rank %d" % r,
                      lambda r=r: ps.PowerSGDState(None, matrix_approximation_rank=r,
                                                   start_powerSGD_iter=2),
                      ps.powerSGD_hook))
    for name, make_state, hook in hooks:
        state = make_state() if make_state else None
        times = []
        for it in range(-a.warmup, a.iters):
            buf = pristine.clone()
            dist.barrier()
            t0 = time.perf_counter()
            hook(state, Bucket(buf, shapes)).wait()
            t1 = time.perf_counter()
            dist.barrier()
            if it >= 0:
                times.append(t1 - t0)
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            med = float(t.median()) if a.iters % 2 else float(t.sort().values[a.iters // 2 - 1:a.iters // 2 + 1].mean())
            results.append({"hook": "torch/" + name, "world": a.world, "bucket_bytes": n * 4,
                            "median_s": med, "iters": a.iters})
    dist.barrier()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--matrices", type=int, default=25)
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        results = mp.Manager().list()
        mp.spawn(worker, args=(a, os.path.join(d, "store"), results), nprocs=a.world)
        for r in results:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
