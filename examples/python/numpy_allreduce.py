#!/usr/bin/env python3
"""Average a NumPy array across 2 processes through a ddph hook, no framework.

    python3 examples/python/numpy_allreduce.py                 # starts 2 ranks itself
    python3 examples/python/numpy_allreduce.py --rank 0 --world 2 --rendezvous file:///tmp/job --job demo &
    python3 examples/python/numpy_allreduce.py --rank 1 --world 2 --rendezvous file:///tmp/job --job demo
    torchrun --nproc-per-node 2 examples/python/numpy_allreduce.py --rendezvous env://
    ddph lab --world 2 -- python3 examples/python/numpy_allreduce.py --rendezvous env://

With env:// rank 0 serves the rendezvous at MASTER_ADDR:MASTER_PORT, and
without --rank the rank and world size come from RANK and WORLD_SIZE, as
torchrun and ddph lab set them.

Each rank fills element i with (rank + 1) * (i % 7); after session.run the
array holds the mean over ranks, (world + 1) / 2 * (i % 7). --config picks
the hook (default: configs/allreduce.yaml); fp16/bf16 hooks pass too, the
check allows their rounding. Prints "rank R: ok" and the session's stats.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))  # a source checkout; an install needs nothing
import ddphooks  # noqa: E402


def run_rank(args):
    if args.rank is None:  # a launcher's ranks: torchrun, ddph lab
        args.rank, args.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    data = ((args.rank + 1) * (np.arange(args.n) % 7)).astype(np.float32)
    with ddphooks.Session(args.config, rank=args.rank, world_size=args.world,
                          rendezvous=args.rendezvous, job=args.job) as session:
        for _ in range(args.steps):
            step_data = data.copy()
            session.run(step_data)  # in place: the mean over ranks
        stats = session.stats()
    want = (args.world + 1) / 2 * (np.arange(args.n) % 7)
    if not np.allclose(step_data, want, rtol=1e-2, atol=1e-2):
        bad = int(np.argmax(np.abs(step_data - want)))
        print("rank %d: element %d is %g, expected %g" % (args.rank, bad, step_data[bad],
                                                          want[bad]))
        return 1
    print("rank %d: ok (%d elements averaged over %d ranks, %d steps; stats %s)"
          % (args.rank, args.n, args.world, args.steps, stats))
    return 0


def launch(args):
    """Starts args.world copies of this script on a fresh file store, as one job."""
    job = args.job or ddphooks.new_job_id()
    with tempfile.TemporaryDirectory(prefix="ddph-numpy-") as d:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r),
                                   "--world", str(args.world), "--rendezvous", "file://" + d,
                                   "--config", args.config, "--n", str(args.n),
                                   "--steps", str(args.steps), "--job", job])
                 for r in range(args.world)]
        return max(p.wait() for p in procs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "allreduce.yaml"))
    p.add_argument("--rank", type=int)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--rendezvous", help="file:///dir, redis://host:port, tcp://host:port or "
                   "env:// (required with --rank; without --rank, a launcher's ranks: RANK "
                   "and WORLD_SIZE from the environment)")
    p.add_argument("--job", help="the job id (default: the YAML's, DDPH_JOB_ID, or 'default'; "
                                  "a launch without --rank makes a fresh one)")
    p.add_argument("--n", type=int, default=1000, help="elements")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    if args.rank is None and not args.rendezvous:
        return launch(args)
    if not args.rendezvous:
        p.error("--rendezvous is required with --rank")
    if args.rank is None and not ("RANK" in os.environ and "WORLD_SIZE" in os.environ):
        p.error("--rendezvous without --rank takes the rank from RANK and WORLD_SIZE, which "
                "are not set (run it under torchrun or ddph lab, or give --rank and --world)")
    return run_rank(args)


if __name__ == "__main__":
    sys.exit(main())
