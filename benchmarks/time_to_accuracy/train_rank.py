#!/usr/bin/env python3
"""One rank of the time-to-accuracy benchmark: PyTorch 1.13 DDP on CPU, Gloo,
Fashion-MNIST, each given hook in turn on the same processes.

Run by `ddph lab` (run_matrix.py does), which gives each rank its own shaped
network card and torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...):

    ddph lab --link 1gbit --world 2 -- /usr/bin/python3 train_rank.py \\
        --model mlp --hooks torch_fp16,ddph_q8 --steps 300 --out runs.jsonl

For each hook: the model from the seed, DDP around it (default buckets),
SGD with momentum, batch --batch per rank, rank r on its own shard of the
training set (the same order for every hook). Every --eval-every steps the
clock stops and each rank scores its own model on its slice of the first
--eval-images test images (the counts are summed); the full 10,000 images
are scored at the end. Rank 0 appends one JSON line per hook to --out, with
a "started" line before each (so a crash names its hook).

With DDPH_LOG_LEVEL set (info: auto's decisions and what its exploring
cost, docs/auto.md), every rank prints the library's lines to stderr.
"""
import argparse
import datetime
import json
import logging
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import fashion_mnist  # noqa: E402
from curves import time_to_target  # noqa: E402
import hooks  # noqa: E402
import models  # noqa: E402

WARMUP_STEPS = 5  # left out of the median step time (first buckets, DDP's rebuild)


def tx_bytes(interface):
    """Bytes this network namespace's `interface` has sent (/proc/net/dev is
    per namespace; /sys/class/net would show the namespace that mounted /sys)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == interface:
                return int(rest.split()[8])
    return None


class Shard:
    """Rank r's shard of the training set: a fresh permutation each epoch
    (from the seed, so every hook sees the same batches), every world-th
    index from position r."""

    def __init__(self, x, y, rank, world, batch, seed):
        self.x, self.y = x, y
        self.rank, self.world, self.batch, self.seed = rank, world, batch, seed
        self.epoch, self.pos, self.order = -1, 0, None

    def next(self):
        if self.order is None or self.pos + self.batch > len(self.order):
            self.epoch += 1
            perm = np.random.default_rng((self.seed, self.epoch)).permutation(len(self.y))
            self.order, self.pos = perm[self.rank::self.world], 0
        idx = self.order[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return self.x[idx], self.y[idx]


def correct(model, x, y, batch=1000):
    model.eval()
    hits = 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            hits += int((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
    model.train()
    return hits


def accuracy(model, x, y, rank, world):
    """Test accuracy over all ranks: each scores its own model on its slice."""
    n = len(y)
    lo, hi = rank * n // world, (rank + 1) * n // world
    counts = torch.tensor([correct(model, x[lo:hi], y[lo:hi]), hi - lo], dtype=torch.int64)
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def auto_choices(handle, spec):
    """For an auto hook: what ran each step, as runs of equal steps
    [first_step, last_step, "q8:fastest;powersgd4:fastest"] (one
    candidate:reason per bucket); None for a fixed hook."""
    from ddphooks.metrics import candidate_names
    session = getattr(handle, "session", None)
    _, kind, make = spec
    if session is None or kind != "ddph":
        return None
    config = make(0)
    if config["hook"]["family"] != "auto":
        return None
    names = candidate_names(config)
    runs = []
    for step in session.metrics(per_bucket=True):
        text = ";".join("%s:%s" % (names[b.candidate], b.reason) for b in step.bucket_metrics
                        if b.candidate >= 0)
        if runs and runs[-1][2] == text and runs[-1][1] == step.step - 1:
            runs[-1][1] = step.step
        else:
            runs.append([step.step, step.step, text])
    return runs


def run_hook(key, args, data, rank, world):
    torch.manual_seed(args.seed)
    net = models.MODELS[args.model]()
    ddp = DDP(net)
    handle = hooks.register(key, ddp, world)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    shard = Shard(data["x_train"], data["y_train"], rank, world, args.batch, args.seed)
    x_eval, y_eval = data["x_test"][:args.eval_images], data["y_test"][:args.eval_images]
    step_times, losses, curve = [], [], []
    train_secs, window = 0.0, []
    dist.barrier()
    tx0 = tx_bytes(args.interface)
    for step in range(1, args.steps + 1):
        xb, yb = shard.next()
        t0 = time.perf_counter()
        loss = loss_fn(ddp(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        train_secs += dt
        step_times.append(dt)
        window.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:
            tx = tx_bytes(args.interface)
            losses.append((step, statistics.fmean(window)))
            window = []
            acc = accuracy(net, x_eval, y_eval, rank, world)
            curve.append((step, train_secs, acc))
            if rank == 0 and args.verbose:
                print("  %s step %d  %.1f s  loss %.4f  acc %.4f" % (key, step, train_secs,
                                                                    losses[-1][1], acc),
                      flush=True)
            # Evaluation traffic is not the hook's: restart the byte count after it.
            tx0 = tx0 + (tx_bytes(args.interface) - tx) if tx is not None else tx0
    tx1 = tx_bytes(args.interface)
    stats = handle.stats() if handle is not None else None
    choices = auto_choices(handle, hooks.HOOKS[key])
    if handle is not None:
        handle.close()
    final = accuracy(net, data["x_test"], data["y_test"], rank, world)
    # The slower rank sets the pace: the largest median step time; bytes per
    # step, the mean over ranks.
    median = statistics.median(step_times[WARMUP_STEPS:] or step_times)
    per_rank = torch.tensor([median, train_secs, (tx1 - tx0) if tx0 is not None else -1],
                            dtype=torch.float64)
    gathered = [torch.zeros_like(per_rank) for _ in range(world)]
    dist.all_gather(gathered, per_rank)
    g = torch.stack(gathered)
    steps_to, secs_to = time_to_target(curve, args.target)
    return {
        "ms_per_step": 1e3 * g[:, 0].max().item(),
        "ms_per_step_ranks": [1e3 * v for v in g[:, 0].tolist()],
        "wall_s": train_secs,
        "wire_mb_per_step": (g[:, 2].mean().item() / args.steps / 1e6
                             if g[:, 2].min().item() >= 0 else None),
        "ddph_wire_mb_per_step": (stats["wire_bytes"] / args.steps / 1e6
                                  if stats and "wire_bytes" in stats else None),
        "curve": curve, "losses": losses,
        "final_accuracy": final,
        "steps_to_target": steps_to, "secs_to_target": secs_to,
        "choices": choices,  # rank 0's, the same on every rank (docs/auto.md)
    }


def main():
    if os.environ.get("DDPH_LOG_LEVEL"):
        # The library filters by DDPH_LOG_LEVEL; its logger passes what it hands over.
        logger = logging.getLogger("ddphooks")
        logger.addHandler(logging.StreamHandler(sys.stderr))
        logger.setLevel(logging.DEBUG)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--hooks", required=True, help="comma-separated keys of hooks.HOOKS")
    p.add_argument("--steps", type=int, default=300, help="the step budget of every hook")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-images", type=int, default=5000)
    p.add_argument("--target", type=float, default=0.85, help="test accuracy to reach")
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--interface", default=os.environ.get("GLOO_SOCKET_IFNAME", "ddph0"))
    p.add_argument("--tag", default="", help="copied into every JSON line")
    p.add_argument("--out", required=True, help="JSON lines, appended by rank 0")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    keys = [k for k in args.hooks.split(",") if k]
    unknown = [k for k in keys if k not in hooks.HOOKS]
    if unknown:
        p.error("unknown hook(s) %s; known: %s" % (", ".join(unknown), ", ".join(hooks.HOOKS)))

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    x_train, y_train = fashion_mnist.load("train")
    x_test, y_test = fashion_mnist.load("test")
    data = {"x_train": torch.from_numpy(x_train), "y_train": torch.from_numpy(y_train),
            "x_test": torch.from_numpy(x_test), "y_test": torch.from_numpy(y_test)}
    if args.model == "mlp":  # the MLP takes flat images; Flatten does it, but once is cheaper
        data["x_train"] = data["x_train"].reshape(-1, 784)
        data["x_test"] = data["x_test"].reshape(-1, 784)
    common = {"model": args.model, "world": world, "link": os.environ.get("DDPH_LAB_LINK"),
              "seed": args.seed, "steps": args.steps, "batch": args.batch, "lr": args.lr,
              "target": args.target, "eval_every": args.eval_every,
              "eval_images": args.eval_images, "tag": args.tag, "torch": torch.__version__}

    def emit(record):
        if rank == 0:
            with open(args.out, "a") as f:
                f.write(json.dumps(dict(record, unix_time=round(time.time(), 1))) + "\n")

    for key in keys:
        emit(dict(common, hook=key, label=hooks.label(key), status="started"))
        result = run_hook(key, args, data, rank, world)
        emit(dict(common, hook=key, label=hooks.label(key), status="ok", **result))
        if rank == 0:
            print("%-45s %7.1f ms/step  %6.1f s  final %.4f  to %.2f: %s steps, %s s" % (
                hooks.label(key), result["ms_per_step"], result["wall_s"],
                result["final_accuracy"], args.target, result["steps_to_target"],
                "%.1f" % result["secs_to_target"] if result["secs_to_target"] else None),
                flush=True)
    # Every rank done with its collectives before any tears its group down.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
