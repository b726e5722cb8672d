#!/usr/bin/python3
"""Turns the results of regenerate_powersgd.sh into the PowerSGD section of
docs/benchmarks.md (between its begin/end markers).

    powersgd_report.py RESULTS_DIR BENCHMARKS.md COMMAND
"""
import collections
import glob
import json
import os
import re
import statistics
import sys

BEGIN = "<!-- powersgd-benchmarks:begin -->"
END = "<!-- powersgd-benchmarks:end -->"
WARMUP = 3  # steps 1..3 of each run are warm-up (and the first compressed step allocates)
LINE = re.compile(r"step (\d+): (\d+) bytes before compression, (\d+) after; "
                  r"([0-9.]+) ms compressing, ([0-9.]+) ms in collectives")


def med(v):
    return statistics.median(v) if v else float("nan")


def main(out, md, command):
    bench = collections.defaultdict(list)
    for line in open(os.path.join(out, "bench.jsonl")):
        if line.strip():
            j = json.loads(line)
            bench[os.path.basename(j["config"]).replace(".yaml", "")].append(j)
    split = collections.defaultdict(lambda: ([], [], []))
    for log in glob.glob(os.path.join(out, "*.log")):
        name = os.path.basename(log).split(".")[0]
        for m in LINE.finditer(open(log).read()):
            if int(m.group(1)) > WARMUP:
                comp, comm, ratio = split[name]
                comp.append(float(m.group(4)))
                comm.append(float(m.group(5)))
                ratio.append(int(m.group(2)) / int(m.group(3)))
    torch = collections.defaultdict(list)
    failed = 0
    for line in open(os.path.join(out, "torch.jsonl")):
        if line.strip():
            j = json.loads(line)
            if j.get("torch_failed"):
                failed += 1
            else:
                torch[j["hook"]].append(j["median_s"])
    base = med([1e3 * x["baseline_allreduce_median_s"] for v in bench.values() for x in v])
    rows = [f"Regenerate with `{command}` (raw results in `docs/bench/powersgd_results/`).", "",
            "| config | runs | median time | raw fp32 allreduce, same run | ratio (median of runs) "
            "| compressing | in collectives | compression ratio | wire bytes per rank |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = ["allreduce", "powersgd_rank1", "powersgd_rank4", "powersgd_rank1_no_ef",
             "powersgd_rank4_no_ef"]
    for name in order:
        v = bench.get(name, [])
        if not v:
            continue
        ratios = [x["ratio_to_baseline"] for x in v]
        comp, comm, cr = split.get(name, ([], [], []))
        rows.append(
            f"| `{name}` | {len(v)} | {1e3 * med([x['median_s'] for x in v]):.1f} ms "
            f"| {1e3 * med([x['baseline_allreduce_median_s'] for x in v]):.1f} ms "
            f"| **{med(ratios):.2f}** ({' '.join(f'{r:.2f}' for r in ratios)}) "
            + (f"| {med(comp):.1f} ms | {med(comm):.1f} ms | {med(cr):.0f}x " if comp else "| | | 1x ")
            + f"| {med([x['wire_bytes_per_rank'] for x in v]) / 1e6:.2f} MB |")
    rows.append("")
    if torch or failed:
        rows += ["PyTorch 1.13's hooks on the same model (`docs/bench/powersgd_torch.py`, 2 Gloo "
                 "processes, one thread each), median over runs of the median iteration, and "
                 "the ratio to the median raw allreduce above:", "",
                 "| PyTorch hook | runs | median time | ratio to raw allreduce |",
                 "| --- | --- | --- | --- |"]
        for hook, v in sorted(torch.items()):
            rows.append(f"| `{hook}` | {len(v)} | {1e3 * med(v):.0f} ms | {1e3 * med(v) / base:.2f} |")
        if failed:
            rows.append(f"\n{failed} PyTorch run(s) failed (crash or hang).")
        rows.append("")
    text = open(md).read()
    section = BEGIN + "\n\n" + "\n".join(rows) + "\n" + END
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    open(md, "w").write(text)


if __name__ == "__main__":
    main(*sys.argv[1:4])
