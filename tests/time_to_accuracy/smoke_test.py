#!/usr/bin/env python3
"""Smoke test of the time-to-accuracy benchmark (benchmarks/time_to_accuracy):
one hook pair, PyTorch's allreduce_hook and ddph's allreduce, 40 steps of the
MLP on Fashion-MNIST, 2 ranks on 1 Gbit/s lab links, through the benchmark's
own trainer. It checks that

- both runs finish and score well above chance (10%) on the test images;
- they follow the same loss curve within fp32 round-off (the same average,
  computed by two implementations);
- the bytes each rank sent per step, counted on its lab network card, are
  those of a ring allreduce of the fp32 gradients (2 (W-1)/W of them; W = 2
  here) plus TCP/IP headers, for both hooks: the benchmark's wire figures
  are then real.

Exits 77 (skipped, with a one-line reason) where the lab cannot be made
(`ddph lab` exit 3), or torch or the dataset is missing.

    smoke_test.py --ddph build/bin/ddph   (DDPH_LIBRARY: the build's libddph.so)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "benchmarks", "time_to_accuracy")
SKIP = 77
STEPS, WORLD = 40, 2
MLP_PARAMS = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10


def skip(reason):
    print("skipped: " + reason)
    sys.exit(SKIP)


def fail(text):
    print("FAILED: " + text)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ddph", required=True)
    p.add_argument("--python", default=sys.executable)
    args = p.parse_args()
    probe = subprocess.run([args.python, "-c", "import torch, numpy"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        skip("%s cannot import torch and numpy (Debian python3-torch, python3-numpy): %s" %
             (args.python, (probe.stderr.strip().splitlines() or ["?"])[-1]))
    sys.path.insert(0, BENCH)
    import fashion_mnist
    missing = fashion_mnist.available()
    if missing:
        skip(missing)

    with tempfile.TemporaryDirectory(prefix="ddph-tta-smoke-") as tmp:
        out = os.path.join(tmp, "runs.jsonl")
        cmd = [args.ddph, "lab", "--link", "1gbit", "--world", str(WORLD), "--timeout", "100",
               "--", args.python, os.path.join(BENCH, "train_rank.py"), "--model", "mlp",
               "--hooks", "torch_allreduce,ddph_allreduce", "--steps", str(STEPS),
               "--eval-every", "20", "--eval-images", "2000", "--out", out]
        run = subprocess.run(cmd, capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        sys.stdout.write(run.stdout)
        if run.returncode == 3:
            skip(run.stderr.strip().splitlines()[-1])
        if run.returncode != 0:
            fail("ddph lab exited %d:\n%s" % (run.returncode, run.stderr[-3000:]))
        with open(out) as f:
            runs = {r["hook"]: r for r in map(json.loads, f) if r["status"] == "ok"}

    for hook in ("torch_allreduce", "ddph_allreduce"):
        if hook not in runs:
            fail("%s did not finish (records: %s)" % (hook, sorted(runs)))
        acc = runs[hook]["final_accuracy"]
        if not acc > 0.5:
            fail("%s: test accuracy %.3f after %d steps; chance is 0.1, a working DDP "
                 "run is far above 0.5" % (hook, acc, STEPS))
        # Each rank sends 2 (W-1)/W of the fp32 gradients a step; the TCP/IP
        # headers (the veth carries 64 KB segments), acks and the store's
        # traffic add well under 15%.
        ring = 2 * (WORLD - 1) / WORLD * 4 * MLP_PARAMS / 1e6
        sent = runs[hook]["wire_mb_per_step"]
        if sent is None or not ring <= sent <= 1.15 * ring:
            fail("%s: %s MB sent per step and rank; a ring allreduce sends %.2f MB plus "
                 "headers" % (hook, sent, ring))
    a = [loss for _, loss in runs["torch_allreduce"]["losses"]]
    b = [loss for _, loss in runs["ddph_allreduce"]["losses"]]
    if len(a) != len(b) or any(abs(x - y) > 1e-5 * max(1.0, abs(x)) for x, y in zip(a, b)):
        fail("the loss curves differ: PyTorch %s, ddph %s" % (a, b))
    print("ok: both finished; losses %s; accuracy %.3f / %.3f; %.2f / %.2f MB per step and rank"
          % (["%.5f" % x for x in a], runs["torch_allreduce"]["final_accuracy"],
             runs["ddph_allreduce"]["final_accuracy"], runs["torch_allreduce"]["wire_mb_per_step"],
             runs["ddph_allreduce"]["wire_mb_per_step"]))


if __name__ == "__main__":
    main()
