#!/usr/bin/env python3
"""Per-step time of a ddph hook against a PyTorch hook, in alternating pairs.

    python3 benchmarks/time_to_accuracy/step_pairs.py                       # allreduce, 10 and 1 Gbit/s, worlds 2 and 4
    python3 benchmarks/time_to_accuracy/step_pairs.py --links 10gbit --pair torch_allreduce,ddph_fp16

One `ddph lab` launch per (link, world) trains the MLP (or --model cnn) with
the two hooks in turn, --pairs times (A, B, A, B, ...), on the same
processes, model and data (train_rank.py). Each run's ms/step is the median
step of its slower rank after warm-up. A pair's ratio is B's ms/step over
the A run just before it; the cell's figure is the median of the pairs'
ratios, so a burst of load on the machine moves one pair, not the figure.

Prints one line per cell and appends the runs to --out (JSON lines, the same
records as run_matrix.py's).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def pair_ratios(records, a, b):
    """B's ms/step over the A run just before it, for each (A, B) pair in
    the order the runs were made."""
    ratios, last_a = [], None
    for r in records:
        if r.get("status") != "ok":
            continue
        if r["hook"] == a:
            last_a = r["ms_per_step"]
        elif r["hook"] == b and last_a is not None:
            ratios.append(r["ms_per_step"] / last_a)
            last_a = None
    return ratios


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair", default="torch_allreduce,ddph_allreduce",
                   help="A,B: hooks.HOOKS keys; the ratio is B/A")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--links", default="10gbit,1gbit")
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--steps", type=int, default=80, help="steps per run")
    p.add_argument("--ddph", default=os.path.join(ROOT, "build", "bin", "ddph"))
    p.add_argument("--library", default=os.path.join(ROOT, "build", "lib", "libddph.so"))
    p.add_argument("--python", default=sys.executable, help="the ranks' interpreter")
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--out", default=os.path.join(HERE, "results", "step_pairs.jsonl"))
    p.add_argument("--tag", default="")
    args = p.parse_args()
    a, b = args.pair.split(",")
    if args.pairs < 1 or args.steps < 20:
        p.error("--pairs must be at least 1 and --steps at least 20 (the first 5 are warm-up)")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    env = dict(os.environ, DDPH_LIBRARY=args.library, OMP_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1")
    for link in args.links.split(","):
        for world in (int(w) for w in args.worlds.split(",")):
            tag = "%s pairs %s/%s" % (args.tag, b, a) if args.tag else "pairs %s/%s" % (b, a)
            cell_out = args.out + ".cell"
            if os.path.exists(cell_out):
                os.remove(cell_out)
            cmd = [args.ddph, "lab", "--link", link, "--world", str(world),
                   "--port", str(args.port), "--timeout", "1200", "--",
                   args.python, os.path.join(HERE, "train_rank.py"), "--model", args.model,
                   "--hooks", ",".join([a, b] * args.pairs), "--steps", str(args.steps),
                   "--eval-every", str(args.steps), "--eval-images", "1000",
                   "--tag", tag, "--out", cell_out]
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                sys.stdout.write(proc.stdout[-3000:])
                sys.exit("step_pairs: the lab failed at %s world %d (exit %d)" %
                         (link, world, proc.returncode))
            with open(cell_out) as f:
                records = [json.loads(line) for line in f if line.strip()]
            os.remove(cell_out)
            with open(args.out, "a") as f:
                for r in records:
                    f.write(json.dumps(r) + "\n")
            ratios = pair_ratios(records, a, b)
            ms = {k: statistics.median(r["ms_per_step"] for r in records
                                       if r.get("status") == "ok" and r["hook"] == k)
                  for k in (a, b)}
            print("%-7s world %d  %s %.1f ms/step, %s %.1f ms/step  %s/%s median of %d pairs "
                  "%.3f (pairs %s)" % (link, world, a, ms[a], b, ms[b], b, a, len(ratios),
                                      statistics.median(ratios),
                                      ", ".join("%.3f" % r for r in ratios)), flush=True)


if __name__ == "__main__":
    main()
