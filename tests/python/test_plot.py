"""python3 -m ddphooks.plot: the figure's title, axes, units, limits and
lines, read back from matplotlib's objects (Agg backend; no image is
compared), for one run and for several runs in one figure, including the
CSV `ddph train --metrics` writes."""
import csv
import os
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib", reason="matplotlib (Debian python3-matplotlib) is absent")

import ddphooks  # noqa: E402  (conftest puts python/ on sys.path)
from ddphooks import plot  # noqa: E402
from ddphooks.metrics import StepMetrics  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1048576.0


def title_of(fig):
    get = getattr(fig, "get_suptitle", None)  # matplotlib 3.8 and later
    return get() if get is not None else fig._suptitle.get_text()


def axes_by_labels(fig):
    return {(ax.get_xlabel(), ax.get_ylabel()): ax for ax in fig.axes}


def write_run(path, hook, steps, bytes_out, seconds_per_step):
    """A run of `steps` steps: loss 1/(s+1), accuracy s/steps (a fraction),
    4 MiB handed in per step, bytes_out out, 3/4 of 4 MiB on the wire, and
    the wall time s * seconds_per_step."""
    with ddphooks.MetricsWriter(path, hook=hook) as w:
        for s in range(steps):
            m = StepMetrics(step=s, buckets=2, bytes_in=4 << 20, bytes_out=bytes_out,
                            wire_bytes=3 << 20, hook_seconds=0.01, queue_seconds=0.0, ok=True)
            w.write(m, loss=1.0 / (s + 1), accuracy=s / steps, wall_seconds=s * seconds_per_step)


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_one_run_is_titled_by_its_hook_with_labelled_axes_and_bytes_from_zero(tmp_path):
    """Before, the title was the CSV's path, the accuracy axis had no unit,
    the bytes axis started at the smallest value and no axis was time."""
    path = tmp_path / "some_dir_name.csv"
    write_run(path, "quantization/per_channel", 5, 1 << 20, 0.5)
    fig = plot.figure([str(path)])
    assert title_of(fig) == "quantization/per_channel"
    axes = axes_by_labels(fig)
    assert set(axes) == {("step", "training loss"), ("step", "accuracy (%)"),
                         ("wall time (s)", "accuracy (%)"), ("step", "MiB per step")}
    # The accuracy fractions drawn as percentages, against the wall time.
    timed = axes[("wall time (s)", "accuracy (%)")].get_lines()
    assert len(timed) == 1
    assert list(timed[0].get_xdata()) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert list(timed[0].get_ydata()) == pytest.approx([0, 20, 40, 60, 80])
    assert len(axes[("step", "training loss")].get_lines()) == 1
    # Bytes in MiB from zero: in 4, out 1, wire 3.
    ax = axes[("step", "MiB per step")]
    assert ax.get_ylim()[0] == 0
    lines = lines_by_label(ax)
    assert set(lines) == {"quantization/per_channel: in", "quantization/per_channel: out",
                          "quantization/per_channel: wire"}
    assert list(lines["quantization/per_channel: in"].get_ydata()) == [4.0] * 5
    assert list(lines["quantization/per_channel: out"].get_ydata()) == [1.0] * 5
    assert list(lines["quantization/per_channel: wire"].get_ydata()) == [3.0] * 5
    # An explicit title wins.
    assert title_of(plot.figure(str(path), title="my run")) == "my run"


def test_several_runs_share_one_figure_named_by_hook_and_by_file_where_hooks_repeat(tmp_path):
    """Before, the command took one CSV."""
    runs = [(tmp_path / "rs8.csv", "quantization/per_channel", 1 << 20, 0.25),
            (tmp_path / "ag8.csv", "quantization/per_channel", 2 << 20, 0.5),
            (tmp_path / "plain.csv", "default/allreduce", 4 << 20, 1.0)]
    for path, hook, out, seconds in runs:
        write_run(path, hook, 4, out, seconds)
    fig = plot.figure([str(r[0]) for r in runs])
    assert title_of(fig) == "quantization/per_channel vs default/allreduce"
    names = ["quantization/per_channel (rs8)", "quantization/per_channel (ag8)",
             "default/allreduce"]
    axes = axes_by_labels(fig)
    timed = lines_by_label(axes[("wall time (s)", "accuracy (%)")])
    assert set(timed) == set(names)
    # Each run at its own pace: the same accuracies at 0.25, 0.5 and 1 s a step.
    for (path, hook, out, seconds), name in zip(runs, names):
        assert list(timed[name].get_xdata()) == [s * seconds for s in range(4)]
    assert len(axes[("step", "accuracy (%)")].get_lines()) == 3
    assert len(axes[("step", "training loss")].get_lines()) == 3
    ax = axes[("step", "MiB per step")]
    assert len(ax.get_lines()) == 9  # in, out and wire of each run
    assert ax.get_ylim()[0] == 0
    sent = lines_by_label(ax)
    assert list(sent["quantization/per_channel (ag8): out"].get_ydata()) == [2.0] * 4
    # Each run keeps its colour in every panel.
    for name in names:
        assert timed[name].get_color() == sent[name + ": out"].get_color()


def test_run_names_fall_back_to_the_file():
    assert plot.run_names(["a/x.csv", "b/y.csv"], [None, "h"]) == ["x", "h"]
    assert plot.run_names(["a/x.csv", "b/x.csv"], ["h", "h"]) == ["h (a/x.csv)", "h (b/x.csv)"]
    assert plot.run_names(["x.csv", "x.csv"], ["h", "h"]) == ["h (x.csv) #1", "h (x.csv) #2"]
    assert plot.run_names(["a/x.csv", "b/x.csv"], [None, None]) == ["a/x.csv", "b/x.csv"]


def test_a_csv_of_ddph_train_is_titled_by_its_hook_and_timed(tmp_path):
    ddph = os.path.join(os.environ.get("DDPH_BUILD_DIR", ""), "bin", "ddph")
    if not os.access(ddph, os.X_OK):
        pytest.skip("the ddph tool is not built (DDPH_BUILD_DIR/bin/ddph)")
    csv_path = tmp_path / "fp16.csv"
    env = dict(os.environ, DDPH_PLUGIN_PATH=os.path.join(os.environ["DDPH_BUILD_DIR"], "lib",
                                                         "ddphooks"))
    r = subprocess.run([ddph, "train", os.path.join(ROOT, "configs", "fp16.yaml"), "--steps",
                        "30", "--log-every", "10", "--metrics", str(csv_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(csv_path)))
    assert [row["hook"] for row in rows] == ["default/fp16_compress"] * 4
    seconds = [float(row["wall_seconds"]) for row in rows]
    assert seconds == sorted(seconds) and seconds[0] > 0
    fig = plot.figure(str(csv_path))
    assert title_of(fig) == "default/fp16_compress"
    timed = axes_by_labels(fig)[("wall time (s)", "accuracy (%)")].get_lines()
    assert list(timed[0].get_xdata()) == seconds
    assert list(timed[0].get_ydata()) == pytest.approx(
        [100 * float(row["accuracy"]) for row in rows])


def test_the_command_draws_several_csvs_into_one_png(tmp_path):
    for name in ("a", "b"):
        write_run(tmp_path / ("%s.csv" % name), "default/" + name, 3, 1 << 20, 1.0)
    png = tmp_path / "runs.png"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-m", "ddphooks.plot", str(tmp_path / "a.csv"),
                        str(tmp_path / "b.csv"), "-o", str(png)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "%s: 6 steps of 2 runs drawn" % png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_csv_of_older_columns_is_not_appended_to(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("step,loss,accuracy,bytes_in,bytes_out,wire_bytes,compression,hook_seconds\n"
                    "0,1,0.5,8,8,8,1,0.1\n")
    with pytest.raises(ValueError, match="old.csv has the columns step, loss, .*hook_seconds, "
                                         "not step, .*wall_seconds, hook"):
        ddphooks.MetricsWriter(path)
    # It still draws: no time panel, named by its file.
    fig = plot.figure(str(path))
    assert title_of(fig) == "old"
    assert ("wall time (s)", "accuracy (%)") not in axes_by_labels(fig)
