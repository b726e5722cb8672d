#!/usr/bin/env python3
"""Runs the time-to-accuracy matrix through `ddph lab` and writes the results.

    python3 benchmarks/time_to_accuracy/run_matrix.py              # everything, about 58 min on 2 cores
    python3 benchmarks/time_to_accuracy/run_matrix.py --phases headline
    python3 benchmarks/time_to_accuracy/run_matrix.py --report      # tables and plot only

Phases, in this order (a run stopped early keeps what it measured):

- headline: MLP, 1gbit, world 4, every hook (seed 0); then ddph's best hook
  and PyTorch's fp16_compress_hook again with seeds 1 and 2.
- 1gbit, 10gbit: the rest of each link rate (MLP and CNN, world 2 and 4,
  every hook, seed 0).
- 100mbit: MLP, world 2 and 4: both fp16 hooks and ddph's two best
  compressed hooks of 1gbit.
- auto (only when named): every cell above again with `auto`
  (docs/auto.md), the cell's best fixed ddph hook as --best-from's runs
  measured it, and PyTorch's allreduce_hook (not at 100mbit), in one
  launch each.
- floor (only when named): `auto` alone on an unshaped link (100gbit), MLP
  and CNN, world 2 and 4: the compute floor that auto_report.py compares
  auto's steps at 1 and 10 Gbit/s with.

Each (model, link, world) cell is one `ddph lab` launch that trains every
hook in turn on the same processes (train_rank.py). When a launch fails, the
hook it was on is recorded as a crash with the launch's last error line, and
the cell goes on from the next hook in a new launch.

Results go to --out-dir: runs.jsonl (one line per hook run: started, ok or
crash), and, from them, table.md and tta.png (report.py).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report  # noqa: E402

ALL_HOOKS = ["torch_allreduce", "torch_fp16", "ddph_allreduce", "ddph_fp16", "ddph_bf16",
             "ddph_q8", "ddph_q4ef", "ddph_psgd1", "ddph_psgd4", "ddph_bpsgd", "ddph_localsgd",
             "ddph_hier_q8",
             # last: it may take the processes down with it
             "torch_powersgd4"]
WORLDS = [4, 2]
# Step budgets and targets per model, at world 4 (docs/performance.md says
# why these). Other world sizes take budget * 4 / world steps, evaluated
# every EVAL_EVERY * 4 / world: every hook sees the same number of training
# images (64,000) and is scored at the same points in them, at any world.
#
# eval_images: the test images scored at each evaluation (the final score
# always takes all 10,000). Every hook of a cell is scored on the same
# images, so a small sample shifts all of them alike. The CNN scores 1,000:
# its forward pass costs 25x the MLP's, and with 5,000 its evaluations took
# twice its training time (about 10 of the matrix's minutes).
MODEL_SETTINGS = {"mlp": {"steps": 250, "target": 0.85, "eval_images": 5000},
                  "cnn": {"steps": 250, "target": 0.82, "eval_images": 1000}}
EVAL_EVERY = 25
REFERENCE_WORLD = 4
HEADLINE = {"model": "mlp", "link": "1gbit", "world": 4}
EXTRA_SEEDS = [1, 2]


def budget(args, model, world):
    """(steps, eval_every) of `model` at `world`."""
    steps = args.steps or MODEL_SETTINGS[model]["steps"] * REFERENCE_WORLD // world
    return steps, max(1, EVAL_EVERY * REFERENCE_WORLD // world)


def lab_command(args, link, world, model, keys, seed, tag, out):
    steps, eval_every = budget(args, model, world)
    return [args.ddph, "lab", "--link", link, "--world", str(world), "--port", str(args.port),
            "--timeout", str(args.cell_timeout), "--",
            sys.executable, os.path.join(HERE, "train_rank.py"), "--model", model,
            "--hooks", ",".join(keys), "--steps", str(steps),
            "--target", str(MODEL_SETTINGS[model]["target"]), "--eval-every", str(eval_every),
            "--eval-images", str(MODEL_SETTINGS[model]["eval_images"]),
            "--seed", str(seed), "--tag", tag, "--out", out]


def read_runs(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def first_error_line(text):
    """The line that says why a launch failed: the first C++ abort
    (`what(): ...`), else the first Python error, else the lab's own line.
    Later lines are mostly the other ranks losing their peer."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for marks in (("what():",), ("terminate called",), ("Error:", "Error ")):
        for l in lines:
            if any(m in l for m in marks) and not l.startswith("ddph lab:"):
                return l[:300]
    # The lab's one-line summaries of each rank come last; its own failure
    # line comes before them.
    told = [l for l in lines if not l.startswith("ddph lab: rank ")]
    return told[-1][:300] if told else (lines[-1][:300] if lines else "no output")


def run_cell(args, link, world, model, keys, seed, tag, log):
    """Trains `keys` in one cell, relaunching past a crashed hook. Returns the
    exit status of the lab (3: no lab here)."""
    out = os.path.join(args.out_dir, "runs.jsonl")
    steps, _ = budget(args, model, world)
    images = MODEL_SETTINGS[model]["eval_images"]
    measured = {r["hook"] for r in read_runs(out) if r["status"] in ("ok", "crash") and
                (r["model"], r["link"], r["world"], r["seed"], r.get("steps", steps),
                 r.get("eval_images", images)) == (model, link, world, seed, steps, images)}
    remaining = [k for k in keys if k not in measured]
    if not remaining:
        print("already measured: %s %s world %d seed %d" % (model, link, world, seed))
    while remaining:
        cmd = lab_command(args, link, world, model, remaining, seed, tag, out)
        print("$ " + " ".join(cmd), flush=True)
        log.write("$ " + " ".join(cmd) + "\n")
        before = len(read_runs(out))
        env = dict(os.environ, DDPH_LIBRARY=args.library, OMP_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        log.write(proc.stdout)
        log.flush()
        sys.stdout.write(proc.stdout)
        if proc.returncode == 3:
            return 3
        new = read_runs(out)[before:]
        done = {r["hook"] for r in new if r["status"] == "ok"}
        remaining = [k for k in remaining if k not in done]
        if proc.returncode == 0 or not remaining:
            break
        crashed = remaining.pop(0)
        label = next((r["label"] for r in new if r["hook"] == crashed), crashed)
        with open(out, "a") as f:
            f.write(json.dumps({"model": model, "world": world, "link": link, "seed": seed,
                                "tag": tag, "steps": steps, "hook": crashed, "label": label,
                                "status": "crash",
                                "exit": proc.returncode,
                                "reason": first_error_line(proc.stdout)}) + "\n")
        print("!! %s crashed: %s" % (crashed, first_error_line(proc.stdout)), flush=True)
    return 0


def best_ddph(runs, model, link, world, n=1):
    """ddph's hooks of a cell that reach the target fastest, best first."""
    ok = [r for r in report.latest(runs).values()
          if r["status"] == "ok" and r["model"] == model and r["link"] == link
          and r["world"] == world and r["hook"].startswith("ddph_") and r["seed"] == 0
          and r["secs_to_target"] is not None]
    ok.sort(key=lambda r: r["secs_to_target"])
    return [r["hook"] for r in ok[:n]]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--phases", default="headline,1gbit,10gbit,100mbit",
                   help="comma-separated; 'auto' and 'floor' only when named (best with --out-dir)")
    p.add_argument("--best-from", default=os.path.join(HERE, "results", "runs.jsonl"),
                   help="the runs whose best fixed ddph hook per cell the auto phase runs")
    p.add_argument("--ddph", default=os.path.join(ROOT, "build", "bin", "ddph"))
    p.add_argument("--library", default=os.path.join(ROOT, "build", "lib", "libddph.so"))
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--steps", type=int, default=0, help="override every model's step budget")
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--cell-timeout", type=float, default=1200)
    p.add_argument("--stop-after-min", type=float, default=0,
                   help="start no cell after this many minutes (0: no limit)")
    p.add_argument("--report", action="store_true", help="only write table.md and tta.png")
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, "runs.jsonl")
    if not args.report:
        started = time.monotonic()
        with open(os.path.join(args.out_dir, "run.log"), "a") as log:
            for cell in plan(args, out):
                if args.stop_after_min and time.monotonic() - started > 60 * args.stop_after_min:
                    print("stopping: past --stop-after-min", flush=True)
                    break
                if cell is None:
                    continue
                if run_cell(args, *cell, log=log) == 3:
                    print("the lab cannot be made here; nothing measured", flush=True)
                    return 3
        print("matrix: %.1f min" % ((time.monotonic() - started) / 60), flush=True)
    report.write(read_runs(out), args.out_dir)
    return 0


def plan(args, out):
    """Yields (link, world, model, hooks, seed, tag) cells; a generator, so
    later cells can depend on what earlier ones measured."""
    phases = args.phases.split(",")
    h = HEADLINE
    if "headline" in phases:
        yield (h["link"], h["world"], h["model"], ALL_HOOKS, 0, "headline")
        best = best_ddph(read_runs(out), h["model"], h["link"], h["world"])
        for seed in EXTRA_SEEDS:
            yield (h["link"], h["world"], h["model"], best + ["torch_fp16"], seed, "headline")
    for link in ("1gbit", "10gbit"):
        if link not in phases:
            continue
        for model in ("mlp", "cnn"):
            for world in WORLDS:
                if (model, link, world) == (h["model"], h["link"], h["world"]) and \
                        "headline" in phases:
                    continue
                yield (link, world, model, ALL_HOOKS, 0, link)
    if "100mbit" in phases:
        for world in WORLDS:
            best = best_ddph(read_runs(out), "mlp", "1gbit", world, n=3)
            compressed = [k for k in best if k not in ("ddph_fp16", "ddph_bf16")][:2]
            yield ("100mbit", world, "mlp", ["torch_fp16", "ddph_fp16"] + compressed, 0,
                   "100mbit")
    if "auto" in phases:
        best_runs = read_runs(args.best_from)
        cells = [("100mbit", "mlp")] + [(link, model) for link in ("1gbit", "10gbit")
                                        for model in ("mlp", "cnn")]
        for link, model in cells:
            for world in WORLDS:
                best = best_ddph(best_runs, model, link, world)
                # PyTorch's allreduce at 100 Mbit/s takes minutes and is far
                # behind (the matrix above): not run again there.
                torch = ["torch_allreduce"] if link != "100mbit" else []
                yield (link, world, model, ["ddph_auto"] + best + torch, 0, "auto")
    if "floor" in phases:
        for model in ("mlp", "cnn"):
            for world in WORLDS:
                yield ("100gbit", world, model, ["ddph_auto"], 0, "floor")


if __name__ == "__main__":
    sys.exit(main())
