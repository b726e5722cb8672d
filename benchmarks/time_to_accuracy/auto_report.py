#!/usr/bin/env python3
"""The table of docs/auto.md from run_matrix.py's auto phase:

    python3 benchmarks/time_to_accuracy/auto_report.py [runs.jsonl [repeat.jsonl]]

One row per cell (model, link, world): auto's time to the target against
the cell's best fixed ddph hook, run in the same launch, the final
accuracies, auto's ms/step against that hook's (where the first ratio is
well above this one, auto took more steps to the target, not longer
steps) and against PyTorch's allreduce_hook and, where
the file holds run_matrix.py's floor phase, against auto's own ms/step on
an unshaped link (100gbit, the same model and world). With a second file
(another launch of the same matrix), its two ratios follow in columns of
their own, so that the spread between launches shows.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read_cells(path):
    cells = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok":
                cells.setdefault((r["model"], r["link"], r["world"]), {})[r["hook"]] = r
    return cells


def ratios(hooks):
    """(best fixed hook, auto, auto / best time to target, auto / torch per step,
    auto / best per step) of a cell."""
    auto = hooks.get("ddph_auto")
    fixed = [h for k, h in hooks.items() if k.startswith("ddph_") and k != "ddph_auto"]
    if auto is None or not fixed:
        return None
    best = fixed[0]
    torch = hooks.get("torch_allreduce")
    tta = ("%.2f" % (auto["secs_to_target"] / best["secs_to_target"])
           if auto["secs_to_target"] and best["secs_to_target"] else "-")
    per_step = "%.2f" % (auto["ms_per_step"] / torch["ms_per_step"]) if torch else "-"
    return best, auto, tta, per_step, "%.2f" % (auto["ms_per_step"] / best["ms_per_step"])


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "auto", "runs.jsonl")
    cells = read_cells(path)
    repeat = read_cells(sys.argv[2]) if len(sys.argv) > 2 else None
    head = ("| model | link | world | best fixed ddph hook | its time to target (s) | auto's (s) | "
            "auto / best | final accuracy, best / auto | auto ms/step / best's | "
            "auto ms/step / PyTorch allreduce's |")
    rule = "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: |"
    if repeat is not None:
        head += " auto / best, another launch | ms/step ratio, another launch |"
        rule += " ---: | ---: |"
    floor = {(m, w): hooks["ddph_auto"] for (m, l, w), hooks in cells.items()
             if l == "100gbit" and "ddph_auto" in hooks}
    if floor:
        head += " auto ms/step / unshaped link's |"
        rule += " ---: |"
    print(head)
    print(rule)
    order = {"100mbit": 0, "1gbit": 1, "10gbit": 2}
    for key in sorted(cells, key=lambda k: (k[0] != "mlp", order.get(k[1], 9), -k[2])):
        row = ratios(cells[key])
        if row is None:
            continue
        best, auto, tta_ratio, per_step, per_step_best = row

        def tta(r):
            return "%.1f" % r["secs_to_target"] if r["secs_to_target"] is not None else "not reached"

        line = "| %s | %s | %d | %s | %s | %s | %s | %.2f%% / %.2f%% | %s | %s |" % (
            key[0], key[1], key[2], best["label"], tta(best), tta(auto), tta_ratio,
            100 * best["final_accuracy"], 100 * auto["final_accuracy"], per_step_best, per_step)
        if repeat is not None:
            other = ratios(repeat.get(key, {}))
            line += " %s | %s |" % ((other[2], other[3]) if other else ("-", "-"))
        if floor:
            base = floor.get((key[0], key[2]))
            line += " %s |" % ("%.2f" % (auto["ms_per_step"] / base["ms_per_step"])
                               if base and key[1] != "100mbit" else "-")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
