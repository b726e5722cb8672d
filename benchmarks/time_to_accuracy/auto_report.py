#!/usr/bin/env python3
"""The table of docs/auto.md from run_matrix.py's auto phase:

    python3 benchmarks/time_to_accuracy/auto_report.py [results/auto/runs.jsonl]

One row per cell (model, link, world): auto's time to the target against
the cell's best fixed ddph hook, run in the same launch, the final
accuracies, and auto's ms/step against PyTorch's allreduce_hook.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "auto", "runs.jsonl")
    cells = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok":
                cells.setdefault((r["model"], r["link"], r["world"]), {})[r["hook"]] = r
    print("| model | link | world | best fixed ddph hook | its time to target (s) | auto's (s) | "
          "auto / best | final accuracy, best / auto | auto ms/step / PyTorch allreduce's |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |")
    order = {"100mbit": 0, "1gbit": 1, "10gbit": 2}
    for key in sorted(cells, key=lambda k: (k[0] != "mlp", order.get(k[1], 9), -k[2])):
        hooks = cells[key]
        auto = hooks.get("ddph_auto")
        fixed = [h for k, h in hooks.items() if k.startswith("ddph_") and k != "ddph_auto"]
        if auto is None or not fixed:
            continue
        best = fixed[0]
        torch = hooks.get("torch_allreduce")

        def tta(r):
            return "%.1f" % r["secs_to_target"] if r["secs_to_target"] is not None else "not reached"

        ratio = ("%.2f" % (auto["secs_to_target"] / best["secs_to_target"])
                 if auto["secs_to_target"] and best["secs_to_target"] else "-")
        per_step = "%.2f" % (auto["ms_per_step"] / torch["ms_per_step"]) if torch else "-"
        print("| %s | %s | %d | %s | %s | %s | %s | %.2f%% / %.2f%% | %s |" % (
            key[0], key[1], key[2], best["label"], tta(best), tta(auto), ratio,
            100 * best["final_accuracy"], 100 * auto["final_accuracy"], per_step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
