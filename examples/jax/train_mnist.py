#!/usr/bin/env python3
"""Data-parallel JAX + optax training of a Fashion-MNIST MLP through ddph
hooks, one process per rank on the CPU, and the time each hook takes to
reach the target test accuracy.

    build/python-jax examples/jax/train_mnist.py                       # 2 local ranks
    ddph lab --link 1gbit --world 2 -- build/python-jax examples/jax/train_mnist.py \\
        --hooks allreduce,q8,powersgd --out runs.jsonl                  # a shaped link

The model is the PyTorch benchmark's (784-1024-1024-10, ReLU), SGD with
momentum 0.9, batch --batch per rank, rank r on every world-th image of a
seeded shuffle. For each hook in turn (the same processes, the model reset
from the seed): the gradients of each step go through
ddphooks.jax.GradientReducer with that hook, every --eval-every steps the
clock stops and the test accuracy is measured on --eval-images images
(every rank holds the same model and scores the same images). Rank 0 prints
a line per hook and appends it as JSON to --out.

Under `ddph lab` (or torchrun) the ranks meet through RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT; started alone, it starts --world ranks itself
on a file store. Needs JAX and optax (./build.sh python makes
build/python-jax) and Fashion-MNIST (Debian's dataset-fashion-mnist).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))  # a source checkout; an install needs nothing
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "time_to_accuracy"))
import fashion_mnist  # noqa: E402
from curves import time_to_target  # noqa: E402

# Each hook: (label, the ddph hook). 8-bit and PowerSGD as the PyTorch
# benchmark runs them (benchmarks/time_to_accuracy/hooks.py).
HOOKS = {
    "allreduce": ("ddph allreduce (fp32)", {"family": "default", "name": "allreduce"}),
    "fp16": ("ddph fp16_compress", {"family": "default", "name": "fp16_compress"}),
    "q8": ("ddph quantization 8-bit reduce_scatter",
           {"family": "quantization", "name": "per_channel",
            "options": {"protocol": "reduce_scatter", "bits": 8, "channel_size": 512,
                        "min_bytes": 65536}}),
    "q4ef": ("ddph quantization 4-bit reduce_scatter + EF",
             {"family": "quantization", "name": "per_channel",
              "options": {"protocol": "reduce_scatter", "bits": 4, "channel_size": 512,
                          "min_bytes": 65536, "error_feedback": True}}),
    "powersgd": ("ddph powersgd rank 4",
                 {"family": "powersgd", "name": "powersgd",
                  "options": {"rank": 4, "start_iter": 10}}),
}
WARMUP_STEPS = 5  # left out of the median step time (the first steps compile)


def init_params(key, hidden):
    import jax
    import jax.numpy as jnp
    sizes = [784, hidden, hidden, 10]
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, wkey, bkey = jax.random.split(key, 3)
        bound = 1.0 / np.sqrt(n_in)  # PyTorch's nn.Linear initialization
        params.append({"w": jax.random.uniform(wkey, (n_in, n_out), jnp.float32, -bound, bound),
                       "b": jax.random.uniform(bkey, (n_out,), jnp.float32, -bound, bound)})
    return params


def logits(params, x):
    import jax
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss(params, x, y):
    import optax
    return optax.softmax_cross_entropy_with_integer_labels(logits(params, x), y).mean()


def train(key, args, data, rank, world):
    import jax
    import optax
    import ddphooks.jax
    label, hook = HOOKS[key]
    config = {"comm": {"backend": "gloo", "timeout": "60s"}, "hook": hook}
    params = init_params(jax.random.PRNGKey(args.seed), args.hidden)
    opt = optax.sgd(args.lr, momentum=0.9)
    opt_state = opt.init(params)
    grad_fn = jax.jit(jax.grad(loss))
    apply = jax.jit(lambda p, s, g: (lambda u, s2: (optax.apply_updates(p, u), s2))(
        *opt.update(g, s, p)))
    predict = jax.jit(lambda p, x: logits(p, x).argmax(-1))
    x_eval, y_eval = data["x_test"][:args.eval_images], data["y_test"][:args.eval_images]
    order = np.random.default_rng(args.seed).permutation(len(data["y_train"]))[rank::world]
    curve, step_times, clock = [], [], 0.0
    with ddphooks.jax.GradientReducer(config, rank=rank, world_size=world,
                                      rendezvous=args.rendezvous, job="%s-%s" % (args.job, key)) \
            as reducer:
        for step in range(1, args.steps + 1):
            at = (step - 1) * args.batch % (len(order) - args.batch)
            idx = order[at:at + args.batch]
            start = time.perf_counter()
            grads = grad_fn(params, data["x_train"][idx], data["y_train"][idx])
            grads = reducer.reduce(grads)
            params, opt_state = apply(params, opt_state, grads)
            jax.block_until_ready(params)
            took = time.perf_counter() - start
            clock += took
            if step > WARMUP_STEPS:
                step_times.append(took)
            if step % args.eval_every == 0 or step == args.steps:
                hits = int((np.asarray(predict(params, x_eval)) == y_eval).sum())
                curve.append((step, clock, hits / len(y_eval)))
        stats = reducer.stats()
    final = int((np.asarray(predict(params, data["x_test"])) == data["y_test"]).sum())
    steps_to, secs_to = time_to_target(curve, args.target)
    return {"hook": key, "label": label, "world": world, "steps": args.steps,
            "batch_per_rank": args.batch, "hidden": args.hidden,
            "ms_per_step": 1e3 * statistics.median(step_times) if step_times else None,
            "train_seconds": clock, "target": args.target, "steps_to_target": steps_to,
            "secs_to_target": secs_to, "final_accuracy": final / len(data["y_test"]),
            "bytes_in_per_step": stats["bytes_in"] / args.steps,
            "bytes_out_per_step": stats["bytes_out"] / args.steps,
            "wire_bytes_per_step": stats["wire_bytes"] / args.steps,
            "link": os.environ.get("DDPH_LAB_LINK"), "curve": curve,
            "date": datetime.date.today().isoformat()}


def run_rank(args, rank, world):
    x_train, y_train = fashion_mnist.load("train")
    x_test, y_test = fashion_mnist.load("test")
    data = {"x_train": x_train.reshape(-1, 784), "y_train": y_train.astype(np.int32),
            "x_test": x_test.reshape(-1, 784), "y_test": y_test.astype(np.int32)}
    for key in args.hooks.split(","):
        row = train(key, args, data, rank, world)
        if rank == 0:
            to = ("%.1f s (step %d)" % (row["secs_to_target"], row["steps_to_target"])
                  if row["secs_to_target"] is not None else "not reached")
            print("%-45s %7.1f ms/step  to %.0f%%: %-22s final %.2f%%  %.2f MiB out/step" %
                  (row["label"], row["ms_per_step"] or 0, 100 * args.target, to,
                   100 * row["final_accuracy"], row["bytes_out_per_step"] / 2**20), flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
    return 0


def launch(args):
    """Starts --world ranks of this script on a fresh file store."""
    with tempfile.TemporaryDirectory(prefix="ddph-jax-") as d:
        env = dict(os.environ, WORLD_SIZE=str(args.world))
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:] +
                                  ["--rendezvous", "file://" + d],
                                  env=dict(env, RANK=str(r))) for r in range(args.world)]
        return max(p.wait() for p in procs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hooks", default="allreduce,q8,powersgd",
                   help="comma-separated, of: " + ", ".join(HOOKS))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-images", type=int, default=2000)
    p.add_argument("--target", type=float, default=0.85, help="test accuracy to reach")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--world", type=int, default=2, help="ranks to start when run alone")
    p.add_argument("--rendezvous", help="the store (default: env:// under ddph lab or torchrun)")
    p.add_argument("--job", default="jax-mnist", help="the job id prefix (one job per hook)")
    p.add_argument("--out", help="append one JSON line per hook (rank 0)")
    args = p.parse_args()
    unknown = [k for k in args.hooks.split(",") if k not in HOOKS]
    if unknown:
        p.error("unknown hook %s; choose from %s" % (", ".join(unknown), ", ".join(HOOKS)))
    for name in ("steps", "batch", "hidden", "eval_every", "eval_images", "world"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if not (0 < args.lr < float("inf")) or not (0 < args.target <= 1):
        p.error("--lr must be a positive number and --target in (0, 1]")
    if "RANK" not in os.environ:
        return launch(args)
    if args.rendezvous is None:
        args.rendezvous = "env://" if "MASTER_ADDR" in os.environ else None
    return run_rank(args, int(os.environ["RANK"]), int(os.environ.get("WORLD_SIZE", "1")))


if __name__ == "__main__":
    sys.exit(main())
