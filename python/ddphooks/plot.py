"""Draws metrics CSVs (ddphooks.MetricsWriter, ddph train --metrics) as one PNG.

    python3 -m ddphooks.plot run.csv -o run.png
    python3 -m ddphooks.plot allreduce.csv rs8.csv powersgd.csv -o runs.png

One figure for all the runs (one CSV each), each run one colour, named in
the legends by the hook that wrote it (the CSV's hook column; the file's
name where that is empty, and beside the hook where two runs share one).
The title names the hooks. Panels, each left out when no run has its
values:
  - loss against the step;
  - accuracy (%) against the step, and against the wall time (s), which
    shows the time each run took to reach an accuracy;
  - MiB (2^20 bytes) per step against the step, from zero: handed to the
    hooks (in, dotted), given to collectives (out, solid) and put on the
    wire (dashed).
An accuracy column of fractions (0 to 1, as ddph train writes it) is drawn
as a percentage. Needs matplotlib (Debian python3-matplotlib, or pip
install matplotlib).
"""
import argparse
import csv
import os
import sys

from .metrics import CSV_COLUMNS, CSV_TEXT_COLUMNS

MIB = 1048576.0
# The byte columns of the bytes panel: (column, legend, line style).
BYTE_LINES = (("bytes_in", "in", ":"), ("bytes_out", "out", "-"),
              ("wire_bytes", "wire", "--"))


def _import_pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("ddphooks.plot needs matplotlib: install Debian's python3-matplotlib "
                         "(apt-get install python3-matplotlib) or pip install matplotlib")
    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt
    return plt


def read_csv(path):
    """{column: [value or None per row]} for CSV_COLUMNS: floats, and text
    for CSV_TEXT_COLUMNS. A column the file lacks (a file of an older
    version) is all None. Refuses a file without a step column or with a
    value that is not a number."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and "step" not in rows[0]:
        raise ValueError("%s has no 'step' column; expected the columns %s"
                         % (path, ", ".join(CSV_COLUMNS)))
    data = {c: [] for c in CSV_COLUMNS}
    for line, row in enumerate(rows, start=2):
        for c in CSV_COLUMNS:
            text = (row.get(c) or "").strip()
            if c in CSV_TEXT_COLUMNS:
                data[c].append(text or None)
                continue
            try:
                data[c].append(float(text) if text else None)
            except ValueError:
                raise ValueError("%s line %d: %s is '%s', not a number" % (path, line, c, text))
    return data


def _hook_of(data):
    return next((h for h in data["hook"] if h), None)


def run_names(paths, hooks):
    """Each run's legend name: its hook; where runs share one, the file's
    name without its extension beside it; the path where those are alike
    too, and #N where even the paths are. A run without a hook is named by
    its file alone."""
    stems = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    first = [h or s for h, s in zip(hooks, stems)]
    names = []
    for i, path in enumerate(paths):
        name = first[i]
        if first.count(name) > 1:
            alike = [j for j in range(len(paths)) if first[j] == name]
            if hooks[i] and len({stems[j] for j in alike}) == len(alike):
                name = "%s (%s)" % (hooks[i], stems[i])
            else:
                name = "%s (%s)" % (hooks[i], path) if hooks[i] else path
                if [paths[j] for j in alike].count(path) > 1:
                    name += " #%d" % (1 + [paths[j] for j in alike[:alike.index(i)]].count(path))
        names.append(name)
    return names


def _series(data, x, y, scale=1.0):
    pts = [(a, b * scale) for a, b in zip(data[x], data[y]) if a is not None and b is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _any(datas, column):
    return any(v is not None for d in datas for v in d[column])


def figure(csv_paths, title=None):
    """The matplotlib Figure of the runs in csv_paths (a path or a list of
    them), not saved; see the module's help for what it draws."""
    if isinstance(csv_paths, (str, os.PathLike)):
        csv_paths = [csv_paths]
    paths = [os.fspath(p) for p in csv_paths]
    if not paths:
        raise ValueError("no CSV file given")
    datas = [read_csv(p) for p in paths]
    hooks = [_hook_of(d) for d in datas]
    names = run_names(paths, hooks)
    plt = _import_pyplot()

    accuracies = [v for d in datas for v in d["accuracy"] if v is not None]
    acc_scale = 100.0 if accuracies and max(accuracies) <= 1.0 else 1.0
    panels = []  # (x column, y column, x label, y label)
    if _any(datas, "loss"):
        panels.append(("step", "loss", "step", "training loss"))
    if accuracies:
        panels.append(("step", "accuracy", "step", "accuracy (%)"))
        if _any(datas, "wall_seconds"):
            panels.append(("wall_seconds", "accuracy", "wall time (s)", "accuracy (%)"))
    if any(_any(datas, c) for c, _, _ in BYTE_LINES):
        panels.append(("step", "bytes", "step", "MiB per step"))
    fig, axes = plt.subplots(max(len(panels), 1), 1, squeeze=False,
                             figsize=(8, 2.8 * max(len(panels), 1)))
    axes = [a[0] for a in axes]
    for ax, (x, y, xlabel, ylabel) in zip(axes, panels):
        for i, (data, name) in enumerate(zip(datas, names)):
            colour = "C%d" % (i % 10)
            if y == "bytes":
                for column, what, style in BYTE_LINES:
                    xs, ys = _series(data, x, column, 1 / MIB)
                    if ys:
                        ax.plot(xs, ys, style, marker=".", linewidth=1, color=colour,
                                label="%s: %s" % (name, what))
            else:
                xs, ys = _series(data, x, y, acc_scale if y == "accuracy" else 1.0)
                if ys:
                    ax.plot(xs, ys, marker=".", linewidth=1, color=colour, label=name)
        if y == "bytes":
            ax.set_ylim(bottom=0)  # a ratio of bytes reads right only from zero
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    if title is None:
        title = " vs ".join(dict.fromkeys(h or n for h, n in zip(hooks, names)))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot(csv_paths, png_path, title=None):
    """Writes the PNG of the runs in csv_paths (a path or a list of them);
    returns the number of rows drawn, over all runs."""
    fig = figure(csv_paths, title)
    plt = _import_pyplot()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    if isinstance(csv_paths, (str, os.PathLike)):
        csv_paths = [csv_paths]
    return sum(len(read_csv(p)["step"]) for p in csv_paths)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m ddphooks.plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="+",
                        help="metrics CSVs, one per run (columns: %s)" % ", ".join(CSV_COLUMNS))
    parser.add_argument("-o", "--output", required=True, help="the PNG file to write")
    parser.add_argument("--title", help="the figure's title (default: the runs' hooks)")
    args = parser.parse_args(argv)
    try:
        n = plot(args.csv, args.output, args.title)
    except (OSError, ValueError) as e:
        print("ddphooks.plot: %s" % e, file=sys.stderr)
        return 1
    print("%s: %d steps of %d run%s drawn" % (args.output, n, len(args.csv),
                                                "" if len(args.csv) == 1 else "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
