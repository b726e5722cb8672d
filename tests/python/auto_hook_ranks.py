"""One rank of test_auto_hook.py (started twice, ranks.spawn): a small DDP
model on Gloo with `hook: {family: auto}`, trained STEPS steps. Its case
"auto" saves the per-bucket metrics (candidate name and reason), the final
parameters and the rows MetricsWriter wrote; the test compares them,
nothing here decides pass or fail.

    auto_hook_ranks.py RANK WORLD INIT_FILE OUT_DIR
"""
import csv
import os
import sys

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import ddphooks.metrics  # noqa: E402
import ddphooks.torch  # noqa: E402
from ranks import run_cases  # noqa: E402

STEPS = 30
CONFIG = {"hook": {"family": "auto", "name": "auto",
                   "options": {"warmup_steps": 2, "recheck_steps": 2}}}


def train(rank):
    out = sys.argv[4]
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
    path = os.path.join(out, "rank%d.csv" % rank)
    with ddphooks.metrics.MetricsWriter(path, candidates=names) as writer:
        for _ in range(STEPS):
            opt.zero_grad()
            loss = ddp(torch.randn(32, 64, generator=g)).pow(2).mean()
            loss.backward()
            opt.step()
            for step in hook.metrics(per_bucket=True):
                writer.write(step)
                for b in step.bucket_metrics:
                    name = names[b.candidate] if 0 <= b.candidate < len(names) else None
                    records.append((b.step, b.bucket, name, b.reason))
    hook.close()
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {"records": records, "names": names, "csv": rows,
            "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()])}


if __name__ == "__main__":
    run_cases({"auto": train}, sys.argv)
