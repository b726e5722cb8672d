#!/usr/bin/python3
"""Turns `ddph bench --json` lines into the quantization section of
docs/benchmarks.md (between its begin/end markers) and a PNG plot of time and
wire bytes against world size.

    quantization_report.py RESULTS.jsonl BENCHMARKS.md PLOT.png COMMAND
"""
import collections
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BEGIN = "<!-- quantization-benchmarks:begin -->"
END = "<!-- quantization-benchmarks:end -->"


def load(path):
    runs = collections.defaultdict(list)
    for line in open(path):
        line = line.strip()
        if line:
            j = json.loads(line)
            runs[(j["config"], j["world"])].append(j)
    return runs


def summarize(runs):
    rows = []
    for (config, world), v in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        rows.append({
            "config": config.split("/")[-1].replace(".yaml", ""),
            "hook": v[0]["hook"],
            "world": world,
            "runs": len(v),
            "median_ms": 1e3 * statistics.median(x["median_s"] for x in v),
            "baseline_ms": 1e3 * statistics.median(x["baseline_allreduce_median_s"] for x in v),
            "ratio": statistics.median(x["ratio_to_baseline"] for x in v),
            "ratios": [x["ratio_to_baseline"] for x in v],
            "wire_mb": statistics.median(x["wire_bytes_per_rank"] for x in v) / 1e6,
            "bucket_mb": v[0]["bucket_bytes"] / 1e6,
        })
    return rows


def table(rows, command, png_name):
    out = [BEGIN, "",
           "Regenerate with `%s` (it rewrites this section and `bench/%s`)." % (command, png_name),
           "",
           "| config | hook | world | runs | median time | raw fp32 allreduce, same run | ratio (median of runs) | wire bytes per rank |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append("| `%s` | `%s` | %d | %d | %.1f ms | %.1f ms | **%.2f** (%s) | %.2f MB |" % (
            r["config"], r["hook"], r["world"], r["runs"], r["median_ms"], r["baseline_ms"],
            r["ratio"], " ".join("%.2f" % x for x in r["ratios"]), r["wire_mb"]))
    out += ["", "![time and wire bytes against world size](bench/%s)" % png_name, "", END]
    return "\n".join(out)


def plot(rows, path):
    fig, (ax_t, ax_w) = plt.subplots(1, 2, figsize=(11, 4.2))
    by_config = collections.defaultdict(list)
    for r in rows:
        by_config[r["config"]].append(r)
    for config, rs in sorted(by_config.items()):
        rs.sort(key=lambda r: r["world"])
        worlds = [r["world"] for r in rs]
        ax_t.plot(worlds, [r["median_ms"] for r in rs], marker="o", label=config)
        ax_w.plot(worlds, [r["wire_mb"] for r in rs], marker="o", label=config)
    ax_t.set_title("time per 25 MB bucket (median)")
    ax_t.set_xlabel("world size")
    ax_t.set_ylabel("ms")
    ax_w.set_title("wire bytes per rank per bucket")
    ax_w.set_xlabel("world size")
    ax_w.set_ylabel("MB")
    for ax in (ax_t, ax_w):
        ax.set_xticks(sorted({r["world"] for r in rows}))
        ax.grid(alpha=0.3)
    ax_w.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    results, md_path, png_path, command = sys.argv[1:5]
    rows = summarize(load(results))
    plot(rows, png_path)
    text = open(md_path).read()
    section = table(rows, command, png_path.split("/")[-1])
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n## Quantization hooks: 25 MB buckets, 2 to 4 ranks\n\n" + section + "\n"
    open(md_path, "w").write(text)
    for r in rows:
        print("%-28s world %d  %8.1f ms  ratio %.2f  wire %.2f MB" % (
            r["config"], r["world"], r["median_ms"], r["ratio"], r["wire_mb"]))


if __name__ == "__main__":
    main()
