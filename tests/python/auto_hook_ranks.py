"""One rank of test_auto_hook.py (started twice): a small DDP model on Gloo
with `hook: {family: auto}`, trained STEPS steps; saves its per-bucket
metrics (candidate name and reason) and final parameters to
OUT_DIR/rank<R>.pt, and its steps through MetricsWriter to OUT_DIR/rank<R>.csv. The test compares them; nothing here decides pass or
fail.

    auto_hook_ranks.py RANK WORLD INIT_FILE OUT_DIR
"""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ddphooks.metrics  # noqa: E402
import ddphooks.torch  # noqa: E402

STEPS = 30
CONFIG = {"hook": {"family": "auto", "name": "auto",
                   "options": {"warmup_steps": 2, "recheck_steps": 2}}}


def main():
    rank, world, init, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 4))
    # A small cap: several buckets a step, each chosen for on its own.
    ddp = DDP(model, bucket_cap_mb=0.25)
    hook = ddphooks.torch.register(ddp, CONFIG)
    names = ddphooks.metrics.candidate_names(CONFIG)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)
    records = []
    writer = ddphooks.metrics.MetricsWriter(os.path.join(out, "rank%d.csv" % rank),
                                            candidates=names)
    for _ in range(STEPS):
        opt.zero_grad()
        x = torch.randn(32, 64, generator=g)
        loss = ddp(x).pow(2).mean()
        loss.backward()
        opt.step()
        for step in hook.metrics(per_bucket=True):
            writer.write(step)
            for b in step.bucket_metrics:
                name = names[b.candidate] if 0 <= b.candidate < len(names) else None
                records.append((b.step, b.bucket, name, b.reason))
    hook.close()
    writer.close()
    torch.save({"records": records, "names": names,
                "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()])},
               os.path.join(out, "rank%d.pt" % rank))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
