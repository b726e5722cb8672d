#!/usr/bin/env python3
"""Time to accuracy on a link whose rate changes while training
(docs/auto.md): one `ddph lab` launch per hook, every one on the same
schedule, so that each hook meets the same rates at the same times.

    python3 benchmarks/time_to_accuracy/changing_link.py
    python3 benchmarks/time_to_accuracy/changing_link.py --schedule 10gbit@0s,100mbit@15s,1gbit@35s

Rank 0 appends one JSON line per hook to --out (train_rank.py's format, with
the schedule in "link"); the table is printed at the end: training wall
time, time to the target, final accuracy, and each against auto's.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

HOOKS = ["ddph_auto", "ddph_allreduce", "ddph_fp16", "ddph_q8", "ddph_q4ef", "ddph_psgd4"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedule", default="10gbit@0s,100mbit@15s,1gbit@35s")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--hooks", default=",".join(HOOKS))
    p.add_argument("--ddph", default=os.path.join(ROOT, "build", "bin", "ddph"))
    p.add_argument("--library", default=os.path.join(ROOT, "build", "lib", "libddph.so"))
    p.add_argument("--out", default=os.path.join(HERE, "results", "changing_link.jsonl"))
    p.add_argument("--report", action="store_true", help="only print the table of --out")
    args = p.parse_args()
    if not args.report:
        for hook in args.hooks.split(","):
            cmd = [args.ddph, "lab", "--link", args.schedule, "--world", str(args.world),
                   "--timeout", "1200", "--", "/usr/bin/python3",
                   os.path.join(HERE, "train_rank.py"), "--model", args.model, "--hooks", hook,
                   "--steps", str(args.steps), "--eval-every", "50", "--tag",
                   "changing " + args.schedule, "--out", args.out]
            print("$ " + " ".join(cmd), flush=True)
            env = dict(os.environ, DDPH_LIBRARY=args.library, OMP_NUM_THREADS="1")
            subprocess.run(cmd, env=env, check=False)
    report(args)
    return 0


def report(args):
    runs = {}
    with open(args.out) as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok" and r.get("tag") == "changing " + args.schedule:
                runs[r["hook"]] = r  # the latest of each hook
    auto = runs.get("ddph_auto")
    print("| hook | ms/step | training time (s) | time to %.0f%% (s) | final accuracy | "
          "its training time / auto's |" % (100 * (auto or {}).get("target", 0.85)))
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for hook, r in runs.items():
        ratio = r["wall_s"] / auto["wall_s"] if auto else float("nan")
        tta = "%.1f" % r["secs_to_target"] if r["secs_to_target"] is not None else "not reached"
        print("| %s | %.1f | %.1f | %s | %.2f%% | %.2f |" % (
            r["label"], r["ms_per_step"], r["wall_s"], tta, 100 * r["final_accuracy"], ratio))


if __name__ == "__main__":
    sys.exit(main())
