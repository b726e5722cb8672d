#!/usr/bin/env python3
"""Where a DDP step's time goes, bucket by bucket: PyTorch's allreduce_hook
against ddph's allreduce on a model of the time-to-accuracy benchmark
(--model mlp or cnn).

Run in the lab, as train_rank.py is:

    ddph lab --link 10gbit --world 2 -- /usr/bin/python3 bucket_timeline.py \\
        --hooks torch,ddph,torch,ddph [--one-bucket] [--out timeline.jsonl]
    python3 bucket_timeline.py --summarize timeline.jsonl   # the table in docs/performance.md

Each hook trains --steps steps on one fixed random batch (the numbers are
about time, not accuracy). Every bucket's hook call and the completion of
the future it returned are timed from the start of the step; each rank
prints the medians over the steps after the first 10:

- submit0->1: from bucket 0's hook call to bucket 1's (the backward between);
- bucket i: from its hook call to its completion;
- step: forward + backward + SGD step.

DDP's default buckets put the MLP's 7.45 MB of gradients into two (4.2 and
3.2 MB), the CNN's 0.59 MB into one; --one-bucket makes DDP's first bucket
as large as the rest, so all of them travel in one.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

# As run_matrix.py runs the ranks: OpenBLAS reads this when torch loads it, and
# its idle threads would otherwise spin (sched_yield) on the cores the ranks share.
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
from ddphooks.torch import ddp as ddph_torch  # noqa: E402 (its comm hook is wrapped below)
import models  # noqa: E402

DDPH_ALLREDUCE = {"comm": {"backend": "gloo", "timeout": "60s"},
                  "hook": {"family": "default", "name": "allreduce"}}
SKIP = 10  # first steps: DDP's bucket rebuild, connections


def timed(inner, events, clock):
    """A comm hook that calls `inner` and notes its call and its completion."""
    def hook(state, bucket):
        i = bucket.index()
        events[("call", i)] = clock()
        fut = inner(state, bucket)

        def done(f):
            events[("done", i)] = clock()
            return f.value()
        return fut.then(done)
    return hook


def run(key, args, rank):
    torch.manual_seed(0)
    net = models.MODELS[args.model]()
    ddp = DDP(net)
    events, start = {}, [0.0]

    def clock():
        return 1e3 * (time.perf_counter() - start[0])
    handle = None
    if key == "torch":
        ddp.register_comm_hook(None, timed(default_hooks.allreduce_hook, events, clock))
    else:
        # register() installs ddphooks.torch.ddp._ddph_comm_hook; wrap it for the call.
        plain = ddph_torch._ddph_comm_hook
        ddph_torch._ddph_comm_hook = timed(plain, events, clock)
        try:
            handle = ddph_torch.register(ddp, DDPH_ALLREDUCE)
        finally:
            ddph_torch._ddph_comm_hook = plain
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    rows = []
    dist.barrier()
    for _ in range(args.steps):
        events.clear()
        start[0] = time.perf_counter()
        loss_fn(ddp(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        events["step"] = clock()
        rows.append(dict(events))
    if handle is not None:
        handle.close()
    rows = rows[SKIP:]
    buckets = sorted({k[1] for r in rows for k in r if isinstance(k, tuple)})

    def med(f):
        return statistics.median(f(r) for r in rows)
    out = {"hook": key, "rank": rank, "one_bucket": args.one_bucket, "buckets": len(buckets),
           "step_ms": med(lambda r: r["step"])}
    for i in buckets:
        out["bucket%d_ms" % i] = med(lambda r: r[("done", i)] - r[("call", i)])
    if len(buckets) > 1:
        out["submit0_to_1_ms"] = med(lambda r: r[("call", 1)] - r[("call", 0)])
        out["call0_to_last_done_ms"] = med(
            lambda r: max(r[("done", i)] for i in buckets) - r[("call", 0)])
    return out


def summarize(path):
    """A markdown table of --out's lines: per link, buckets and rank, the
    medians over the runs of each hook, and the median of the step-time
    ratios of consecutive torch/ddph runs (the --hooks torch,ddph,... order)."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    print("| model | link | buckets | rank | runs | ms/step torch | ms/step ddph | ddph / torch "
          "| first call to last done, torch (ms) | ddph (ms) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    groups = sorted({(r.get("model", "mlp"), r["link"], r["buckets"], r["rank"]) for r in rows},
                    key=lambda g: (g[0] != "mlp", g[1], -g[2], g[3]))
    for model, link, buckets, rank in groups:
        runs = {k: [r for r in rows if (r.get("model", "mlp"), r["link"], r["buckets"],
                                        r["rank"], r["hook"]) == (model, link, buckets, rank, k)]
                for k in ("torch", "ddph")}
        ratios = [d["step_ms"] / t["step_ms"] for t, d in zip(runs["torch"], runs["ddph"])]
        if not ratios:
            continue
        comm = "call0_to_last_done_ms" if buckets > 1 else "bucket0_ms"

        def med(k, field):
            return statistics.median(r[field] for r in runs[k])
        print("| %s | %s | %d | %d | %d | %.1f | %.1f | %.2f | %.1f | %.1f |" % (
            model, link, buckets, rank, len(ratios), med("torch", "step_ms"), med("ddph", "step_ms"),
            statistics.median(ratios), med("torch", comm), med("ddph", comm)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hooks", default="torch,ddph,torch,ddph",
                   help="comma-separated: torch (allreduce_hook) or ddph (allreduce)")
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--one-bucket", action="store_true")
    p.add_argument("--out", help="JSON lines, appended by every rank")
    p.add_argument("--summarize", metavar="JSONL", help="only print the table of a --out file")
    args = p.parse_args()
    if args.summarize:
        summarize(args.summarize)
        return
    if args.one_bucket:
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    torch.set_num_threads(1)
    rank = dist.get_rank()
    for key in args.hooks.split(","):
        row = run(key, args, rank)
        row["link"] = os.environ.get("DDPH_LAB_LINK", "")
        row["model"] = args.model
        print(" ".join("%s=%s" % (k, ("%.2f" % v) if isinstance(v, float) else v)
                       for k, v in row.items()), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
