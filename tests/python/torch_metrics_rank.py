"""One process of test_torch_metrics.py: a world of one (Gloo), a DDP model
with fp16_compress, three steps, and the hook's metrics written to a CSV.

    torch_metrics_rank.py INIT_FILE CSV_FILE
"""
import csv
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ddphooks  # noqa: E402
import ddphooks.torch  # noqa: E402


def main():
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    grad_bytes = 4 * sum(p.numel() for p in model.parameters())  # 161 floats
    ddp = DDP(model)
    hook = ddphooks.torch.register(ddp, {"hook": {"family": "default", "name": "fp16_compress"}})
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    with ddphooks.MetricsWriter(sys.argv[2]) as writer:
        for _ in range(3):
            opt.zero_grad()
            loss = ddp(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            opt.step()
            for m in hook.metrics():
                writer.write(m, loss=loss.item())
    rows = list(csv.DictReader(open(sys.argv[2])))
    assert [r["step"] for r in rows] == ["0", "1", "2"], rows
    for r in rows:
        assert int(r["bytes_in"]) == grad_bytes, (r, grad_bytes)
        assert int(r["bytes_out"]) == grad_bytes // 2, (r, grad_bytes)  # fp16 on the wire
        assert float(r["compression"]) == 2.0 and r["loss"] != "", r
    assert hook.metrics() == []
    hook.close()
    dist.destroy_process_group()
    print("ok")


if __name__ == "__main__":
    main()
