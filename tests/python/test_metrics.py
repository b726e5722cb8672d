"""Per-step metrics from ddphooks.Session against exact byte counts, the
library's log lines in `logging`, the CSV writer and the plot command."""
import csv
import logging
import os
import re
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

import ddphooks  # noqa: E402  (conftest puts python/ on sys.path)
from ddphooks import logs  # noqa: E402
from ddphooks.metrics import StepMetrics  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SIZES = (1000, 333)  # float32 elements of a step's two buckets


def hook(name):
    return {"hook": {"family": "default", "name": name}}


def three_steps(session):
    for step in range(3):
        session.run(np.full(SIZES[0], 1.0, np.float32), index=0, is_last=False)
        session.run(np.full(SIZES[1], 2.0, np.float32), index=1, is_last=True)


@pytest.mark.parametrize("name, out_per_in", [("allreduce", 1.0), ("fp16_compress", 0.5)])
def test_metrics_across_three_steps_are_exact_byte_counts(name, out_per_in):
    with ddphooks.Session(hook(name), rank=0, world_size=1) as s:
        assert s.metrics() == []
        three_steps(s)
        steps = s.metrics(per_bucket=True)
        assert s.metrics() == []  # taken once
    assert [m.step for m in steps] == [0, 1, 2]
    step_bytes = 4 * sum(SIZES)
    for m in steps:
        assert m.buckets == 2 and m.ok
        assert m.bytes_in == step_bytes
        assert m.bytes_out == step_bytes * out_per_in
        assert m.compression == 1 / out_per_in
        assert m.hook_seconds > 0 and m.queue_seconds >= 0
        assert [(b.bucket, b.is_last, b.bytes_in) for b in m.bucket_metrics] == [
            (0, False, 4 * SIZES[0]), (1, True, 4 * SIZES[1])]
        assert m.hook_seconds == pytest.approx(sum(b.hook_seconds for b in m.bucket_metrics))


def test_spans_are_each_buckets_phases_on_the_monotonic_clock():
    # fp16_compress: cast (compress), allreduce (collective), cast back
    # (decompress), each bucket in that order, between the host's run()
    # call and its return as time.monotonic_ns() reads them (ABI 1.7).
    import time
    with ddphooks.Session(hook("fp16_compress"), rank=0, world_size=1) as s:
        assert s.spans() == []
        windows = {}
        for step in range(2):
            for index, n in enumerate(SIZES):
                before = time.monotonic_ns()
                s.run(np.full(n, 1.0, np.float32), index=index, is_last=index == 1)
                windows[(step, index)] = (before, time.monotonic_ns())
        spans = s.spans()
        assert s.spans() == []  # taken once
    by_bucket = {}
    for sp in spans:
        by_bucket.setdefault((sp.step, sp.bucket), []).append(sp)
    assert sorted(by_bucket) == sorted(windows)
    for key, mine in by_bucket.items():
        assert [sp.phase for sp in mine] == ["compress", "collective", "decompress"], key
        before, after = windows[key]
        assert before <= mine[0].start_ns and mine[-1].end_ns <= after, (key, mine, windows[key])
        for a, b in zip(mine, mine[1:]):
            assert a.start_ns <= a.end_ns <= b.start_ns, key


def test_a_step_comes_once_its_last_bucket_completed():
    with ddphooks.Session(hook("allreduce"), rank=0, world_size=1) as s:
        s.run(np.ones(10, np.float32), is_last=False)
        assert s.metrics() == []
        s.run(np.ones(6, np.float32), index=1, is_last=True)
        (m,) = s.metrics()
    assert (m.step, m.buckets, m.bytes_in) == (0, 2, 64)


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_library_log_lines_reach_logging_with_family_and_rank(monkeypatch):
    monkeypatch.delenv("DDPH_LOG_LEVEL", raising=False)
    logger = logging.getLogger("ddphooks")
    handler = Records()
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "level", logging.DEBUG)
    config = {"hook": {"family": "powersgd", "name": "batched_powersgd",
                       "options": {"start_iter": 0, "rank": 1, "error_feedback": False,
                                   "warm_start": False}}}
    try:
        with ddphooks.Session(config, rank=0, world_size=1) as s:
            s.run(np.ones(1024, np.float32))
    finally:
        logger.removeHandler(handler)
        logs.install()  # back to the level of the logger as it was
    steps = [r for r in handler.records if "step 1 of batched_powersgd" in r.getMessage()]
    assert len(steps) == 1, [r.getMessage() for r in handler.records]
    r = steps[0]
    assert (r.levelno, r.family, r.rank, r.name) == (logging.DEBUG, "powersgd", 0, "ddphooks")
    assert r.getMessage().startswith("powersgd [rank 0]: step 1 of batched_powersgd: 4096 bytes")


def test_log_level_follows_the_logger_unless_DDPH_LOG_LEVEL_says(monkeypatch):
    logger = logging.getLogger("ddphooks")
    monkeypatch.delenv("DDPH_LOG_LEVEL", raising=False)
    monkeypatch.setattr(logger, "level", logging.ERROR)
    assert logs.library_level() == 0  # DDPH_LOG_ERROR
    monkeypatch.setattr(logger, "level", logging.INFO)
    assert logs.library_level() == 2  # DDPH_LOG_INFO
    monkeypatch.setenv("DDPH_LOG_LEVEL", "debug")
    assert logs.library_level() == 3


def documented_columns():
    """The CSV columns as docs/metrics.md lists them (its table's first column)."""
    text = open(os.path.join(ROOT, "docs", "metrics.md")).read()
    section = text.split("## The CSV file", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `(\w+)` \|", section, re.M)]


def test_metrics_writer_writes_the_documented_csv(tmp_path):
    assert documented_columns() == list(ddphooks.CSV_COLUMNS)
    seen, scalars = [], []

    class Board:
        def add_scalar(self, tag, value, step):
            scalars.append((tag, value, step))

    path = tmp_path / "run.csv"
    with ddphooks.Session(hook("fp16_compress"), rank=0, world_size=1) as s:
        three_steps(s)
        steps = s.metrics()
    with ddphooks.MetricsWriter(path, callback=lambda *a: seen.append(a),
                                summary_writer=Board()) as w:
        w.write(steps[0], loss=0.5, accuracy=0.25)
        w.write_all(steps[1:])
    with ddphooks.MetricsWriter(path) as w:  # appends, no second header
        w.write(StepMetrics(step=3, buckets=1, bytes_in=8, bytes_out=0, wire_bytes=0,
                            hook_seconds=0.125, queue_seconds=0.0, ok=True))
    rows = list(csv.reader(open(path)))
    assert rows[0] == list(ddphooks.CSV_COLUMNS)
    step_bytes = 4 * sum(SIZES)
    assert rows[1][:7] == ["0", "0.5", "0.25", str(step_bytes), str(step_bytes // 2), "0", "2.0"]
    assert rows[2][:7] == ["1", "", "", str(step_bytes), str(step_bytes // 2), "0", "2.0"]
    assert float(rows[2][7]) == steps[1].hook_seconds
    assert rows[4][:8] == ["3", "", "", "8", "0", "0", "", "0.125"]  # no bytes out: no ratio
    assert float(rows[4][8]) >= 0 and rows[4][9] == ""  # wall time since the writer; no hook
    assert len(rows) == 5
    assert ("loss", 0.5, 0) in seen and ("ddph/compression", 2.0, 2) in seen
    assert ("accuracy", 0.25, 0) in scalars and ("ddph/bytes_in", step_bytes, 1) in scalars
    assert seen == scalars


def plot_cmd(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "ddphooks.plot", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (Debian python3-matplotlib) is absent")
    path = tmp_path / "run.csv"
    with ddphooks.MetricsWriter(path) as w:
        for step in range(5):
            w.write(StepMetrics(step=step, buckets=2, bytes_in=4000, bytes_out=2000,
                                wire_bytes=3000, hook_seconds=0.01, queue_seconds=0.0, ok=True),
                    loss=1.0 / (step + 1), accuracy=step / 5)
    png = tmp_path / "run.png"
    r = plot_cmd(str(path), "-o", str(png))
    assert r.returncode == 0, r.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000  # three panels of lines, not an empty canvas


def test_plot_names_a_bad_value(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(",".join(ddphooks.CSV_COLUMNS) + "\n0,high,,1,1,1,1,0.1\n")
    r = plot_cmd(str(path), "-o", str(tmp_path / "bad.png"))
    assert r.returncode == 1
    assert "line 2: loss is 'high', not a number" in r.stderr
