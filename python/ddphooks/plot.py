"""Draws a metrics CSV (ddphooks.MetricsWriter, ddph train --metrics) as a PNG.

    python3 -m ddphooks.plot run.csv -o run.png

Up to three panels over the step: loss, accuracy (each only when the file
has values for it), and bytes per step (in, out, on the wire). Needs
matplotlib (Debian python3-matplotlib, or pip install matplotlib).
"""
import argparse
import csv
import sys

from .metrics import CSV_COLUMNS


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
    """{column: [float or None per row]} for CSV_COLUMNS; refuses a file
    without a step column or with a value that is not a number."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and "step" not in rows[0]:
        raise ValueError("%s has no 'step' column; expected the columns %s"
                         % (path, ", ".join(CSV_COLUMNS)))
    data = {c: [] for c in CSV_COLUMNS}
    for line, row in enumerate(rows, start=2):
        for c in CSV_COLUMNS:
            text = (row.get(c) or "").strip()
            try:
                data[c].append(float(text) if text else None)
            except ValueError:
                raise ValueError("%s line %d: %s is '%s', not a number" % (path, line, c, text))
    return data


def plot(csv_path, png_path, title=None):
    """Writes the PNG for csv_path; returns the number of steps drawn."""
    data = read_csv(csv_path)
    plt = _import_pyplot()
    steps = data["step"]
    panels = [c for c in ("loss", "accuracy") if any(v is not None for v in data[c])]
    fig, axes = plt.subplots(len(panels) + 1, 1, sharex=True, squeeze=False,
                             figsize=(8, 2.6 * (len(panels) + 1)))
    axes = [a[0] for a in axes]

    def series(column):
        pts = [(s, v) for s, v in zip(steps, data[column]) if s is not None and v is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    for ax, column in zip(axes, panels):
        ax.plot(*series(column), marker=".", linewidth=1)
        ax.set_ylabel(column)
        ax.grid(True, alpha=0.3)
    ax = axes[-1]
    for column, label in (("bytes_in", "bytes in"), ("bytes_out", "bytes out"),
                          ("wire_bytes", "bytes on the wire")):
        xs, ys = series(column)
        if ys:
            ax.plot(xs, ys, marker=".", linewidth=1, label=label)
    ax.set_ylabel("bytes per step")
    ax.set_xlabel("step")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.suptitle(title or csv_path)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return len(steps)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m ddphooks.plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="a metrics CSV (columns: %s)" % ", ".join(CSV_COLUMNS))
    parser.add_argument("-o", "--output", required=True, help="the PNG file to write")
    parser.add_argument("--title", help="the figure's title (default: the CSV's path)")
    args = parser.parse_args(argv)
    try:
        n = plot(args.csv, args.output, args.title)
    except (OSError, ValueError) as e:
        print("ddphooks.plot: %s" % e, file=sys.stderr)
        return 1
    print("%s: %d steps drawn" % (args.output, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
