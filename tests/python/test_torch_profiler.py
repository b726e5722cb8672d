"""Each ddph bucket is a range in torch.profiler's trace, from its
submission to its completion on ddph's worker, named after the hook.
One process, a world of 1 on Gloo, under PyTorch 1.13 and 2.

ddphooks.torch.profiler: spans measured on the wall clock land in a
torch.profiler Chrome trace at the times torch's own ranges show, on both
trace formats (PyTorch 2's dict with baseTimeNanoseconds, 1.13's list)."""
import json
import os
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402
import ddphooks.torch  # noqa: E402
import ddphooks.torch.profiler as ddph_profiler  # noqa: E402

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


def _profiled_range(tmp_path, name, seconds):
    """Profiles a range `name` of `seconds` on this thread; returns the
    exported trace's path, the mark, and the wall clock read just outside
    the range (so the true range lies within [before, after])."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        mark = ddph_profiler.clock_mark()
        before = time.time_ns()
        with torch.autograd.profiler.record_function(name):
            time.sleep(seconds)
        after = time.time_ns()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return path, mark, before, after


def _events(trace):
    return trace if isinstance(trace, list) else trace["traceEvents"]


HTO_FP16 = {"comm": {"backend": "host"},
            "hook": {"family": "optimizer_overlap", "name": "hook_then_optimizer",
                     "options": {"optimizer": "sgd", "lr": 0.01},
                     "wrap": {"family": "default", "name": "fp16_compress"}}}


@pytest.mark.parametrize("config, phases", [
    (Q8, {"compress", "collective", "decompress"}),
    (HTO_FP16, {"compress", "collective", "decompress", "optimizer_step"}),
], ids=["quantization_8bit", "hook_then_optimizer_fp16"])
def test_every_bucket_of_every_step_shows_its_phases_inside_its_range(tmp_path, config, phases):
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.register(ddp, config)
    batches = pr.batches(0)
    # An unprofiled step first (DDP's rebuild): its spans must stay out.
    nn.functional.mse_loss(ddp(batches[0][0]), batches[0][1]).backward()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for x, y in batches[1:1 + STEPS]:
            nn.functional.mse_loss(ddp(x), y).backward()
    path = str(tmp_path / "trace.json")
    # How far the alignment may place a span off (export aligns by the
    # narrowest mark), in us, + the trace's 1 us rounding twice, + 20 us for
    # the profiler's clock running at another rate than the wall clock's
    # over the test's second (ppm at most; a wall-clock step would be more).
    slack_us = min(m.uncertainty_ns for _, m in hook._clock_marks._marks) / 1e3 + 22.0
    ddph_profiler.export_chrome_trace(prof, path, hook)
    assert hook._clock_marks.take() == []  # export used them up
    hook.close()
    events = _events(json.loads(open(path).read()))

    # The bucket ranges, by DDP's bucket index; the k-th of an index is the
    # k-th profiled step (DDP starts buckets in index order, as ddph counts them).
    prefix = hook.label + " bucket "
    ranges = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name", "").startswith(prefix):
            ranges.setdefault(int(e["name"][len(prefix):]), []).append(e)
    assert ranges and all(len(r) == STEPS for r in ranges.values()), \
        {b: len(r) for b, r in ranges.items()}
    spans = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "ddph" and e.get("name", "").startswith("ddph/"):
            spans.setdefault((e["args"]["step"], e["args"]["bucket"]), []).append(e)
    steps = sorted({step for step, _ in spans})
    assert len(steps) == STEPS, steps  # the unprofiled step's are left out
    assert set(spans) == {(s, b) for s in steps for b in ranges}, (sorted(spans), sorted(ranges))

    for (step, bucket), found in spans.items():
        names = {e["name"][len("ddph/"):] for e in found}
        assert phases <= names, (step, bucket, names)
        r = sorted(ranges[bucket], key=lambda e: float(e["ts"]))[steps.index(step)]
        r_ts, r_end = float(r["ts"]), float(r["ts"]) + float(r["dur"])
        for e in found:
            ts, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            # Within the range, up to the clock alignment's uncertainty.
            assert r_ts - slack_us <= ts <= end <= r_end + slack_us, (step, bucket, e, r, slack_us)


def test_export_refuses_a_hook_that_ran_nothing_under_the_profiler(tmp_path):
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.register(ddp, Q8)
    x, y = pr.batches(0)[0]
    nn.functional.mse_loss(ddp(x), y).backward()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(4).sum()
    try:
        with pytest.raises(ValueError, match="DDPHook ran no bucket under this profiler"):
            ddph_profiler.export_chrome_trace(prof, str(tmp_path / "t.json"), hook)
    finally:
        hook.close()


def test_a_span_lands_on_the_range_measured_with_it(tmp_path):
    path, mark, before, after = _profiled_range(tmp_path, "user_range", 0.05)
    span = ddph_profiler.Span("collective", before, after, step=3, bucket=1, bytes=4096)
    ddph_profiler.add_spans(path, [span], mark, rank=0)

    events = _events(json.loads(path.read_text()))
    (user,) = [e for e in events if e.get("name") == "user_range" and e.get("ph") == "X"]
    (added,) = [e for e in events if e.get("name") == "ddph/collective"]
    assert added["ph"] == "X" and added["pid"] == user["pid"]
    assert added["args"] == {"step": 3, "bucket": 1, "bytes": 4096, "rank": 0}
    # The span was read just outside the range, so it must contain it, up to
    # the alignment's uncertainty (the mark's width on the wall clock).
    slack_us = mark.uncertainty_ns / 1e3 + 1.0  # + the trace's 1 us rounding
    user_ts, user_end = float(user["ts"]), float(user["ts"]) + float(user["dur"])
    added_ts, added_end = float(added["ts"]), float(added["ts"]) + float(added["dur"])
    assert added_ts <= user_ts + slack_us, (added, user, mark)
    assert added_end >= user_end - slack_us, (added, user, mark)
    # ... and not be far outside it: by no more than the wall-clock time
    # spent outside the range (after - before - the range's own duration).
    outside_us = (after - before) / 1e3 - float(user["dur"])
    assert added_ts >= user_ts - outside_us - slack_us, (added, user, mark)
    assert added_end <= user_end + outside_us + slack_us, (added, user, mark)
    names = [e for e in events if e.get("ph") == "M" and e.get("tid") == added["tid"]]
    assert names and names[0]["args"]["name"] == "ddph bucket 1"


def test_a_trace_without_the_mark_is_refused_by_name(tmp_path):
    path, mark, before, after = _profiled_range(tmp_path, "user_range", 0.001)
    other = ddph_profiler.ClockMark("ddph/clock#not-here", before, after)
    with pytest.raises(ValueError, match="clock#not-here"):
        ddph_profiler.add_spans(path, [], other)


def test_a_span_that_ends_before_it_starts_is_refused(tmp_path):
    path, mark, before, after = _profiled_range(tmp_path, "user_range", 0.001)
    bad = ddph_profiler.Span("compress", after, before, step=0, bucket=2)
    with pytest.raises(ValueError, match="compress of step 0 bucket 2"):
        ddph_profiler.add_spans(path, [bad], mark)
