"""ddph's per-bucket phases in a torch.profiler trace: the clock alignment.

A bucket's phases (compress, collective, decompress, optimizer step) run on
the session's C++ worker thread. torch.profiler does not see them there: its
RecordFunction callbacks are installed per thread (PyTorch 2 follows other
threads only with ``_ExperimentalConfig(profile_all_threads=True)``, 1.13
never), and a C++ thread of ddph's never calls RecordFunction anyway. So the
phases are added to the exported Chrome trace after the fact, at the times
they were measured.

The two clocks differ by version: PyTorch 2 writes ``ts`` in microseconds
from ``baseTimeNanoseconds`` (the wall clock), 1.13 from the profiler's
start. Neither is documented, so instead of relying on either, ``clock_mark``
puts a range of its own into the trace, on a thread the profiler follows,
around a read of the wall clock; ``add_spans`` finds that range in the
exported trace and shifts the spans by the difference. That holds for every
version and clock base.

    with torch.profiler.profile() as prof:
        mark = ddphooks.torch.profiler.clock_mark()
        ...                                    # training steps
    prof.export_chrome_trace("trace.json")
    ddphooks.torch.profiler.add_spans("trace.json", spans, mark)

A span is a ``Span``: a phase's name, its start and end in
``time.time_ns()`` nanoseconds, and the bucket it belongs to.

For a DDP hook or an FSDP2 handle, one call does it all: the hook marks the
clock itself at every profiled step, and ``export_chrome_trace`` exports the
trace and adds the phases the hook reported since the last call:

    with torch.profiler.profile() as prof:
        ...                                    # training steps
    ddphooks.torch.profiler.export_chrome_trace(prof, "trace.json", hook)
"""
import collections
import dataclasses
import itertools
import json
import os
import time
from typing import Iterable, Optional

import torch

# Every name this module writes begins with it, so ddph's ranges group in
# the trace viewer's search.
PREFIX = "ddph/"
# The lanes (Chrome trace "tid") of the added spans: one per bucket index,
# far from the thread ids torch writes.
_LANE_BASE = 1 << 40

_marks = itertools.count()


@dataclasses.dataclass
class Span:
    """One phase of one bucket on this rank."""
    name: str         # "compress", "collective", "decompress", "optimizer_step"
    start_ns: int     # time.time_ns() at its start
    end_ns: int       # time.time_ns() at its end
    step: int
    bucket: int       # index within its step
    bytes: int = 0    # the bucket's gradient bytes


@dataclasses.dataclass
class ClockMark:
    """A range clock_mark put into the trace and the wall clock around it."""
    name: str
    before_ns: int  # time.time_ns() just before the range began
    after_ns: int   # time.time_ns() just after it ended
    # time.time_ns() - time.monotonic_ns() when it was made: what turns
    # ddph's span records (monotonic) into wall-clock times.
    wall_minus_monotonic_ns: Optional[int] = None

    @property
    def uncertainty_ns(self):
        """How far the spans may be off in the trace: the range's whole width
        on the wall clock (the alignment matches the range's middles)."""
        return self.after_ns - self.before_ns


def clock_mark():
    """Puts a short range into the active torch.profiler trace, from the
    calling thread (one the profiler follows: the one that entered it), and
    returns what add_spans needs to place ddph's spans beside torch's."""
    name = f"{PREFIX}clock#{os.getpid()}.{next(_marks)}"
    offset = time.time_ns() - time.monotonic_ns()
    before = time.time_ns()
    with torch.autograd.profiler.record_function(name):
        pass
    return ClockMark(name=name, before_ns=before, after_ns=time.time_ns(),
                     wall_minus_monotonic_ns=offset)


class StepMarks:
    """The clock marks a hook made under the profiler, each with the step
    (as the session numbers them) it was made at. Bounded: a long profile
    keeps its latest marks."""

    def __init__(self, keep=4096):
        self._marks = collections.deque(maxlen=keep)

    def mark_if_profiling(self, step):
        """One mark for `step`, when torch.profiler is recording and the step
        has none yet."""
        if not torch.autograd._profiler_enabled():
            return
        if self._marks and self._marks[-1][0] == step:
            return
        self._marks.append((step, clock_mark()))

    def take(self):
        marks = list(self._marks)
        self._marks.clear()
        return marks


def export_chrome_trace(prof, path, *hooks, rank: Optional[int] = None):
    """Exports `prof`'s trace to `path` (prof.export_chrome_trace) and adds
    the phases (compress, collective, decompress, optimizer_step) of each
    bucket that every hook in `hooks` (DDPHook, FSDPCompressor) ran during
    the profile, from the spans the hooks reported since their last
    spans() call. Raises ValueError when a hook ran no bucket under `prof`.
    Returns the path."""
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    present = {e.get("name") for e in _events(trace) if e.get("ph") == "X"}
    for hook in hooks:
        marks = [(step, m) for step, m in hook._clock_marks.take() if m.name in present]
        records = hook.spans()
        if not marks:
            raise ValueError("ddphooks.torch.profiler: %s ran no bucket under this profiler "
                             "(no clock mark of it in the trace)" % type(hook).__name__)
        # Spans from the first profiled step on; aligned by the narrowest
        # mark (the first after the profiler starts can take milliseconds).
        first_step = marks[0][0]
        mark = min((m for _, m in marks), key=lambda m: m.uncertainty_ns)
        offset = mark.wall_minus_monotonic_ns
        spans = [Span(r.phase, r.start_ns + offset, r.end_ns + offset, step=r.step,
                      bucket=r.bucket) for r in records if r.step >= first_step]
        add_spans(trace, spans, mark, rank=rank)
    tmp = path + ".ddph-tmp"
    with open(tmp, "w") as f:
        json.dump(trace, f)
    os.replace(tmp, path)
    return path


def _events(trace):
    # PyTorch 2 writes {"traceEvents": [...], ...}; 1.13 a bare list.
    return trace if isinstance(trace, list) else trace["traceEvents"]


def _find_mark(events, mark):
    for e in events:
        if e.get("name") == mark.name and e.get("ph") == "X":
            return e
    raise ValueError(f"ddphooks.torch.profiler: the clock mark {mark.name!r} is not in the "
                     f"trace: call clock_mark() inside the profiler whose trace this is, "
                     f"on the thread that entered it")


def add_spans(trace, spans: Iterable[Span], mark: ClockMark, *, rank: Optional[int] = None):
    """Adds `spans` to a Chrome trace exported by torch.profiler as complete
    events ("ph": "X") named "ddph/<phase>", one lane per bucket index in the
    process of the mark, args {step, bucket, bytes, rank}.

    `trace` is a path (the file is rewritten) or the loaded JSON (changed in
    place and returned). Returns the loaded JSON."""
    path = None
    if isinstance(trace, (str, os.PathLike)):
        path = os.fspath(trace)
        with open(path) as f:
            trace = json.load(f)
    events = _events(trace)
    anchor = _find_mark(events, mark)
    # Trace microseconds minus wall-clock microseconds, matching the middles.
    offset_us = (float(anchor["ts"]) + float(anchor.get("dur", 0)) / 2 -
                 (mark.before_ns + mark.after_ns) / 2e3)
    pid = anchor.get("pid", 0)
    lanes = set()
    for s in spans:
        if s.end_ns < s.start_ns:
            raise ValueError(f"ddphooks.torch.profiler: span {s.name} of step {s.step} bucket "
                             f"{s.bucket} ends before it starts")
        lane = _LANE_BASE + s.bucket
        lanes.add((lane, s.bucket))
        args = {"step": s.step, "bucket": s.bucket, "bytes": s.bytes}
        if rank is not None:
            args["rank"] = rank
        events.append({"name": PREFIX + s.name, "cat": "ddph", "ph": "X", "pid": pid,
                       "tid": lane, "ts": round(s.start_ns / 1e3 + offset_us, 3),
                       "dur": round((s.end_ns - s.start_ns) / 1e3, 3), "args": args})
    for lane, bucket in sorted(lanes):
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": lane,
                       "args": {"name": f"ddph bucket {bucket}"}})
    if path is not None:
        tmp = path + ".ddph-tmp"
        with open(tmp, "w") as f:
            json.dump(trace, f)
        os.replace(tmp, path)
    return trace
