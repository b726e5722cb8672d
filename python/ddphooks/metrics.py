"""Per-bucket and per-step figures of a session, and a CSV writer for them.

``Session.metrics()`` (and the PyTorch hook's ``metrics()``) takes the
records the library kept since the last call (ddph_session_take_metrics: the
latest 65536 buckets) and returns one ``StepMetrics`` per completed step.
``MetricsWriter`` appends them to a CSV file in the columns of
``CSV_COLUMNS`` (docs/metrics.md), the format ``ddph train --metrics`` writes
and ``python3 -m ddphooks.plot`` draws.
"""
import csv
import ctypes
import dataclasses
import math
import os
import time
from typing import List, Optional, Tuple

from . import _abi, errors

# The CSV format, in this order. loss and accuracy are the trainer's (empty
# when not given); bytes_in .. hook_seconds are sums over the step's buckets
# on this rank; wall_seconds is the training's wall time so far and hook the
# hook chain that wrote the run (empty when not given), which
# python3 -m ddphooks.plot titles and tells runs apart by; choices an auto
# hook's candidate and reason per bucket of the step, "q8:fastest;..."
# (empty for a fixed hook).
CSV_COLUMNS = ("step", "loss", "accuracy", "bytes_in", "bytes_out", "wire_bytes", "compression",
               "hook_seconds", "wall_seconds", "hook", "choices")
# The columns that hold text rather than numbers.
CSV_TEXT_COLUMNS = ("hook", "choices")


@dataclasses.dataclass
class BucketMetrics:
    """One completed bucket, as the library measured it around the hooks."""
    step: int
    bucket: int           # index within its step, in submission order
    is_last: bool
    bytes_in: int         # gradient bytes handed to the hooks
    bytes_out: int        # payload bytes the hooks gave to collectives (0: not counted)
    wire_bytes: int       # bytes this rank put on the wire (0: unknown)
    queue_seconds: float  # submit -> the worker starting it
    hook_seconds: float   # the worker starting it -> done
    ok: bool
    start_ns: int = 0     # time.monotonic_ns() when the worker started it (ABI 1.7)
    # `hook: {family: auto}` (ABI 1.10): the candidate that ran it, as its
    # index in the candidates option (candidate_names() names them; -1 for
    # a fixed hook or an older libddph), and why: "fixed", "warmup",
    # "explore", "fastest", "critical" or "model" (docs/auto.md).
    candidate: int = -1
    reason: str = "fixed"


@dataclasses.dataclass
class StepMetrics:
    """One completed step: sums over its buckets."""
    step: int
    buckets: int
    bytes_in: int
    bytes_out: int
    wire_bytes: int
    hook_seconds: float
    queue_seconds: float
    ok: bool
    bucket_metrics: Optional[List[BucketMetrics]] = None  # with per_bucket=True
    # An auto hook's (candidate, reason) per bucket, in bucket order (see
    # BucketMetrics); empty when every bucket ran a fixed hook.
    choices: List[Tuple[int, str]] = dataclasses.field(default_factory=list)

    @property
    def compression(self):
        """bytes_in / bytes_out (2.0 for fp16 compression), or None when the
        hooks counted no bytes out."""
        return self.bytes_in / self.bytes_out if self.bytes_out else None


def _take_all(take, handle, struct, convert, lib, **unfilled):
    """Every record a ddph_session_take_* function holds, oldest first,
    each through convert (they are then gone). unfilled: the values of
    fields that an older libddph, which fills less of the struct and leaves
    the rest as it was, must read as."""
    out = []
    rec = _abi.new(struct, **unfilled)
    taken = ctypes.c_int32(0)
    while True:
        errors.check(lib, take(handle, ctypes.byref(rec), ctypes.byref(taken)))
        if not taken.value:
            return out
        out.append(convert(rec))


def take_records(lib, handle):
    """Every record the session holds, oldest first (they are then gone)."""
    def record(rec):
        return BucketMetrics(
            step=int(rec.step), bucket=int(rec.bucket), is_last=bool(rec.is_last),
            bytes_in=int(rec.bytes_in), bytes_out=int(rec.bytes_out),
            wire_bytes=int(rec.wire_bytes), queue_seconds=float(rec.queue_seconds),
            hook_seconds=float(rec.hook_seconds), ok=bool(rec.ok), start_ns=int(rec.start_ns),
            candidate=int(rec.candidate), reason=_reason_name(int(rec.choice_reason)))
    # Before ABI 1.10 no bucket had a candidate: -1, reason "fixed" (0).
    return _take_all(lib.ddph_session_take_metrics, handle, _abi.BucketMetrics, record, lib,
                     candidate=-1, choice_reason=0)


def _reason_name(reason):
    return (_abi.CHOICE_REASONS[reason] if 0 <= reason < len(_abi.CHOICE_REASONS)
            else "reason %d" % reason)


# The auto hook's candidates when its options name none (loader/auto/candidates.cpp).
DEFAULT_CANDIDATES = ("allreduce", "fp16", "bf16", "q8", "q4ef", "powersgd4")


def candidate_names(config):
    """The names of an auto hook's candidates, in the order that
    BucketMetrics.candidate indexes (the `candidates` option of `hook:
    {family: auto}`, or DEFAULT_CANDIDATES); [] when the config's hook is not
    auto. config: a dict, YAML text or path, as Session takes it.

        names = candidate_names(config)
        for b in step.bucket_metrics:
            print(names[b.candidate] if b.candidate >= 0 else "fixed", b.reason)
    """
    from ._config import config_doc  # it imports session, which imports this module
    doc = config_doc(config)
    hook = doc.get("hook") if isinstance(doc, dict) else None
    if not isinstance(hook, dict) or hook.get("family") != "auto":
        return []
    listed = (hook.get("options") or {}).get("candidates")
    if listed is None:
        return list(DEFAULT_CANDIDATES)
    return [name.strip() for name in str(listed).split(",")]


class StepAccumulator:
    """Groups bucket records into steps; keeps the buckets of a step whose
    last bucket has not completed yet for the next call."""

    def __init__(self):
        self._open = []

    def steps(self, records, per_bucket=False):
        done = []
        for r in records:
            self._open.append(r)
            if r.is_last:
                done.append(_step_of(self._open, per_bucket))
                self._open = []
        return done


def _step_of(buckets, per_bucket):
    return StepMetrics(
        step=buckets[-1].step, buckets=len(buckets),
        bytes_in=sum(b.bytes_in for b in buckets), bytes_out=sum(b.bytes_out for b in buckets),
        wire_bytes=sum(b.wire_bytes for b in buckets),
        hook_seconds=sum(b.hook_seconds for b in buckets),
        queue_seconds=sum(b.queue_seconds for b in buckets),
        ok=all(b.ok for b in buckets), bucket_metrics=list(buckets) if per_bucket else None,
        choices=[(b.candidate, b.reason) for b in buckets] if any(
            b.candidate >= 0 for b in buckets) else [])


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(value) if isinstance(value, float) else str(value)


@dataclasses.dataclass
class PhaseSpan:
    """One phase of one bucket, as a hook reported it (ddph_session_take_spans).
    start_ns and end_ns are time.monotonic_ns() readings: add
    time.time_ns() - time.monotonic_ns() for the wall clock."""
    phase: str     # "compress", "collective", "decompress", "optimizer_step" or "phase N"
    step: int      # as BucketMetrics.step
    bucket: int    # as BucketMetrics.bucket
    start_ns: int
    end_ns: int


def take_spans(lib, handle):
    """Every span the session holds, in the order the hooks reported them
    (they are then gone)."""
    def span(rec):
        phase = int(rec.phase)
        name = _abi.PHASES[phase] if 0 <= phase < len(_abi.PHASES) else "phase %d" % phase
        return PhaseSpan(phase=name, step=int(rec.step), bucket=int(rec.bucket),
                         start_ns=int(rec.start_ns), end_ns=int(rec.end_ns))
    return _take_all(lib.ddph_session_take_spans, handle, _abi.Span, span, lib)


class MetricsWriter:
    """Appends one CSV row per step to `path` (columns: CSV_COLUMNS; the header
    is written when the file is new or empty) and forwards every figure to
    `callback(tag, value, step)` and/or `summary_writer.add_scalar(tag, value,
    step)` (e.g. torch.utils.tensorboard.SummaryWriter). Tags: "loss",
    "accuracy", and "ddph/<column>" for the library's figures.

    `hook` names the run's hook chain in every row (e.g.
    "quantization/per_channel"), which the plot titles by. `candidates`, an
    auto hook's candidate names (candidate_names(config)), names the
    choices column's candidates ("candidate N" without it). Each row's
    wall_seconds is the time since the writer was made, unless write() is
    given it (e.g. the training time with evaluation left out).

        writer = MetricsWriter("run.csv", hook="default/fp16_compress")
        ...
        for m in hook.metrics():
            writer.write(m, loss=loss.item())
    """

    def __init__(self, path, *, callback=None, summary_writer=None, hook=None, candidates=None):
        self.path = os.fspath(path)
        self._callback = callback
        self._summary = summary_writer
        self._hook = hook
        self._candidates = list(candidates or [])
        self._start = time.monotonic()
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        if not new:
            # Rows of these columns under another header would be misread.
            with open(self.path, newline="") as f:
                header = next(csv.reader(f), [])
            if tuple(header) != CSV_COLUMNS:
                raise ValueError("%s has the columns %s, not %s (a file of another ddphooks "
                                 "version?): write to a new file"
                                 % (self.path, ", ".join(header), ", ".join(CSV_COLUMNS)))
        self._file = open(self.path, "a", newline="")
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(CSV_COLUMNS)
            self._file.flush()

    def write(self, m, *, loss=None, accuracy=None, wall_seconds=None):
        """One row for StepMetrics `m`, with the trainer's loss and accuracy
        for that step when given, and the wall time (seconds; default: since
        the writer was made)."""
        if wall_seconds is None:
            wall_seconds = time.monotonic() - self._start
        row = {"step": m.step, "loss": loss, "accuracy": accuracy, "bytes_in": m.bytes_in,
               "bytes_out": m.bytes_out, "wire_bytes": m.wire_bytes,
               "compression": m.compression, "hook_seconds": m.hook_seconds,
               "wall_seconds": float(wall_seconds), "hook": self._hook,
               "choices": ";".join("%s:%s" % (self._candidate(c), reason)
                                   for c, reason in m.choices) or None}
        self._csv.writerow([_cell(row[c]) for c in CSV_COLUMNS])
        self._file.flush()
        for column in CSV_COLUMNS[1:]:
            value = row[column]
            if value is None or column in CSV_TEXT_COLUMNS:
                continue
            tag = column if column in ("loss", "accuracy") else "ddph/" + column
            if self._callback is not None:
                self._callback(tag, value, m.step)
            if self._summary is not None:
                self._summary.add_scalar(tag, value, m.step)

    def _candidate(self, index):
        if 0 <= index < len(self._candidates):
            return self._candidates[index]
        return "candidate %d" % index

    def write_all(self, steps, *, loss=None, accuracy=None, wall_seconds=None):
        """write() for each of `steps` (e.g. what metrics() returned)."""
        for m in steps:
            self.write(m, loss=loss, accuracy=accuracy, wall_seconds=wall_seconds)

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
