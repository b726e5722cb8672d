"""Each ddph bucket is a range in torch.profiler's trace, from its
submission to its completion on ddph's worker, named after the hook.
One process, a world of 1 on Gloo, under PyTorch 1.13 and 2."""
import json
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402
import ddphooks.torch  # noqa: E402

STEPS = 3
Q8 = {"comm": {"backend": "host"},
      "hook": {"family": "quantization", "name": "per_channel",
               "options": {"protocol": "reduce_scatter", "bits": 8}}}


pytestmark = pytest.mark.usefixtures("gloo_world_of_one")


def profiled_trace(tmp_path):
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.register(ddp, Q8)
    batches = pr.batches(0)
    nn.functional.mse_loss(ddp(batches[0][0]), batches[0][1]).backward()  # DDP's rebuild
    before = hook.stats()["buckets"]
    hook.metrics()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for x, y in batches[1:1 + STEPS]:
            nn.functional.mse_loss(ddp(x), y).backward()
    buckets = hook.stats()["buckets"] - before
    per_bucket = [b for m in hook.metrics(per_bucket=True) for b in m.bucket_metrics]
    hook.close()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    # PyTorch 2 writes {"traceEvents": [...]}, 1.13 the bare list.
    return trace["traceEvents"] if isinstance(trace, dict) else trace, buckets, per_bucket


def test_every_bucket_is_a_range_named_after_the_hook(tmp_path):
    events, buckets, per_bucket = profiled_trace(tmp_path)
    ranges = [e for e in events if e.get("ph") == "X" and
              e.get("name", "").startswith("ddph quantization/per_channel bucket ")]
    assert buckets >= STEPS, (buckets, STEPS)
    assert len(ranges) == buckets, (len(ranges), buckets)
    assert len(per_bucket) == buckets
    # The range ends when the bucket completes: it is at least as long as the
    # hook ran on ddph's worker (metrics measure that from the worker's start).
    longest_hook_us = max(b.hook_seconds for b in per_bucket) * 1e6
    assert max(e["dur"] for e in ranges) >= 0.9 * longest_hook_us, (
        [e["dur"] for e in ranges], longest_hook_us)
    assert all(e["dur"] >= 0 for e in ranges)
