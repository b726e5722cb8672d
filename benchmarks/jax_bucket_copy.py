#!/usr/bin/env python3
"""What ddphooks.jax's copies cost: one GradientReducer.reduce of the
time-to-accuracy MLP's gradients (784-1024-1024-10, 1.86 M float32) on a
world of one (the hook's collective is then a no-op, so what is left is the
adapter), against its parts: the copy of the leaves into the bucket, and
handing the bucket back to JAX through DLPack (no copy) or jnp.asarray (a
copy). Medians of --repeat runs, one process.

    build/python-jax benchmarks/jax_bucket_copy.py
"""
import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import ddphooks.jax  # noqa: E402
from ddphooks.jax import reducer as reducer_mod  # noqa: E402


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args()
    sizes = [(784, 1024), (1024,), (1024, 1024), (1024,), (1024, 10), (10,)]
    rng = np.random.default_rng(0)
    grads = [jnp.asarray(rng.standard_normal(s, dtype=np.float32)) for s in sizes]
    numel = sum(int(np.prod(s)) for s in sizes)
    cfg = {"hook": {"family": "default", "name": "allreduce"}}
    with ddphooks.jax.GradientReducer(cfg, rank=0, world_size=1) as red:
        red.reduce(grads)  # the plan and the agreement, once
        whole = median_ms(lambda: jax.block_until_ready(red.reduce(grads)), args.repeat)
    buf = reducer_mod._aligned_zeros(numel + 64, np.dtype(np.float32))

    def copy_in():
        at = 0
        for g in grads:
            buf[at:at + g.size] = np.asarray(g).reshape(-1)
            at += -(-g.size // 16) * 16
    gather = median_ms(copy_in, args.repeat)
    adopt = median_ms(lambda: jax.dlpack.from_dlpack(buf[:numel]), args.repeat)
    copy_out = median_ms(lambda: jax.block_until_ready(jnp.asarray(buf[:numel])), args.repeat)
    print("reduce() of %d float32 (%.1f MiB) on a world of one: %.2f ms" %
          (numel, numel * 4 / 2**20, whole))
    print("  copy of the leaves into the bucket:      %.2f ms (%.0f%% of reduce)" %
          (gather, 100 * gather / whole))
    print("  back to JAX through DLPack (no copy):    %.3f ms" % adopt)
    print("  back to JAX with jnp.asarray (a copy):   %.2f ms" % copy_out)


if __name__ == "__main__":
    main()
