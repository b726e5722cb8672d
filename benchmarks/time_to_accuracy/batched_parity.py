#!/usr/bin/env python3
"""ddph's batched_powersgd against PyTorch's batched_powerSGD_hook, step by
step, on the time-to-accuracy benchmark's own training (docs/powersgd.md,
"Appendix: batched PowerSGD against PyTorch, step by step").

    python3 benchmarks/time_to_accuracy/batched_parity.py --model mlp --steps 300 --follow torch

Two ranks on CPU/Gloo (started here; no lab: the link does not change the
numbers) train the benchmark's model with its data, seed, batch, SGD and
learning rate. Every bucket of every step goes to BOTH hooks, each on its
own copy of the same gradients: PyTorch's batched_powerSGD_hook (1.13, with
the unsqueeze its _orthogonalize needs, as tests/powersgd/torch_parity_test
does; shipped, it fails its own assertion on every bucket) and ddph's
batched_powersgd through a ddphooks.Session, with the same options (rank,
start_iter 10, error feedback, warm start, seed 0). After each bucket the
script compares the outputs and, from the ddph session's checkpoint, P, Q
and the error with PyTorch's PowerSGDState. --follow says whose output goes
into the model (so the training is PyTorch's hook's, or ddph's, with the
other one shadowing it on the same inputs).

Left alone, both hooks run from their own state since the first
compressed step, so rounding differences can grow. --resync-every N writes
PyTorch's state (P, Q, errors, step, RNG) into a ddph checkpoint by
docs/powersgd.md's table and loads it before every N-th step: that step
compares one step from the same state. --perturb also runs a second
PyTorch state on the inputs with their last bit flipped, to show how far
PyTorch's hook drifts from itself through rounding alone.

Every --svd-every steps it records how much of each bucket's averaged
gradient rank 1 can carry at best: sigma_1^2 / sum sigma^2 of the bucket
as the batched hook's square matrix, and the same per layer as the
layer-wise hook sees it (each weight as a (shape[0], -1) matrix, biases
sent whole).

Rank 0 prints one line per evaluation and a summary; --out appends the
summary as one JSON line.
"""
import argparse
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import ddphooks  # noqa: E402
import fashion_mnist  # noqa: E402
import models  # noqa: E402
from train_rank import Shard, accuracy  # noqa: E402

START = 10  # hooks.POWERSGD_START

# PyTorch 1.13's batched hook hands _orthogonalize 2-D matrices where it
# asserts 3-D; the fix is the batch dimension (as the parity test does).
_orthogonalize = ps._orthogonalize
ps._orthogonalize = lambda m, epsilon=0: _orthogonalize(m.unsqueeze(0) if m.dim() == 2 else m,
                                                       epsilon)


class Bucket:
    """What batched_powerSGD_hook calls on a dist.GradBucket."""

    def __init__(self, buf, index, last):
        self.buf, self.i, self.last = buf, index, last

    def buffer(self):
        return self.buf

    def index(self):
        return self.i

    def is_last(self):
        return self.last


def psgd_memory(session):
    """{index: (P, Q, error)} of the session's batched_powersgd checkpoint,
    read by docs/powersgd.md's table (container checksum not verified)."""
    data = session.state_dict()
    (count,) = struct.unpack_from("<I", data, 12)
    at = 16
    blob = None
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, at)
        family = data[at + 4:at + 4 + n]
        at += 4 + n
        (n,) = struct.unpack_from("<I", data, at)
        at += 4 + n
        (n,) = struct.unpack_from("<Q", data, at)
        at += 8
        if family == b"powersgd":
            blob = data[at:at + n]
        at += n
    assert blob is not None and blob[:8] == b"DDPHPSGD", "no powersgd record"
    at = 8 + 4 + 4 + 8 + 4 + 624 * 4
    (buckets,) = struct.unpack_from("<I", blob, at)
    at += 4
    out = {}
    for _ in range(buckets):
        (index,) = struct.unpack_from("<Q", blob, at)
        at += 9  # index, flags
        arrays = []
        for _ in range(3):
            (n,) = struct.unpack_from("<Q", blob, at)
            at += 8
            arrays.append(np.frombuffer(blob, dtype="<f4", count=n, offset=at))
            at += 4 * n
        out[index] = arrays
    return out


def fnv1a64(data):
    """docs/powersgd.md's checksum (slow in Python: about 0.25 s per MB)."""
    h, prime, mask = 1469598103934665603, 1099511628211, 0xFFFFFFFFFFFFFFFF
    for byte in data:
        h = ((h ^ byte) * prime) & mask
    return h


def session_state_of(state):
    """A ddph session state holding PyTorch's PowerSGDState, written from
    docs/powersgd.md's table: loaded into the session, the next step of both
    hooks starts from the same P, Q, errors, step and RNG."""
    _, words, pos, _, _ = state.rng.get_state()
    blob = bytearray(b"DDPHPSGD" + struct.pack("<IIQI", 1, 1, state.iter, pos))
    blob += np.asarray(words, dtype="<u4").tobytes()
    indices = sorted(set(state.p_memory_dict) | set(state.error_dict))
    blob += struct.pack("<I", len(indices))
    for i in indices:
        blob += struct.pack("<QB", i, 1 if i in state.p_memory_dict else 0)
        for d in (state.p_memory_dict, state.q_memory_dict, state.error_dict):
            a = d[i].numpy().astype("<f4").ravel() if i in d else np.zeros(0, "<f4")
            blob += struct.pack("<Q", a.size) + a.tobytes()
    blob += struct.pack("<Q", fnv1a64(blob))
    out = bytearray(b"DDPHSTAT" + struct.pack("<II", 2, 1))
    for field, width in ((b"powersgd", "<I"), (b"batched_powersgd", "<I"), (bytes(blob), "<Q")):
        out += struct.pack(width, len(field)) + field
    out += struct.pack("<Q", fnv1a64(out))
    return bytes(out)


def flip_last_bits(x, seed):
    """x with the lowest mantissa bit of each element flipped at random: a
    change of about 6e-8 of each value, below the rounding of the products."""
    bits = torch.randint(0, 2, x.shape, generator=torch.Generator().manual_seed(seed),
                         dtype=torch.int32)
    return (x.view(torch.int32) ^ bits).view(torch.float32)


def rel(a, b):
    """max |a - b| / max |b| (0 when both are 0)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        return float("inf")
    scale = np.abs(b).max() if b.size else 0.0
    d = np.abs(a - b).max() if b.size else 0.0
    return float(d / scale) if scale > 0 else float(d)


def rank1_share(matrix):
    """sigma_1^2 / sum sigma^2: the part of the matrix's energy rank 1 can carry."""
    s = torch.linalg.svdvals(matrix.double())
    total = float((s ** 2).sum())
    return float(s[0] ** 2) / total if total > 0 else 0.0


def carried(x, bucket, st):
    """The share of the bucket's averaged gradient that rank 1 can carry at
    best: as the batched hook sees it (one square matrix) and as the
    layer-wise one does (each parameter of 2 or more dimensions as a
    (shape[0], -1) matrix, biases sent whole)."""
    mean = x.clone()
    dist.all_reduce(mean)
    mean /= st.world
    total = float(mean.double().pow(2).sum())
    side = math.ceil(math.sqrt(mean.numel()))
    square = torch.zeros(side * side, dtype=mean.dtype)
    square[:mean.numel()] = mean
    layerwise, at = 0.0, 0
    for g in bucket.gradients():
        part = mean[at:at + g.numel()]
        at += g.numel()
        if g.dim() >= 2:
            layerwise += rank1_share(part.view(g.shape[0], -1)) * float(part.double().pow(2).sum())
        else:
            layerwise += float(part.double().pow(2).sum())
    return {"numel": mean.numel(), "side": side,
            "batched_rank1_share": rank1_share(square.view(side, side)),
            "layerwise_rank1_share": layerwise / total if total > 0 else 0.0,
            "gradient_norm": math.sqrt(total),
            "error_norm_torch": float(st.ps.error_dict[bucket.index()].norm())}


class Both:
    """The comm hook's state: PyTorch's PowerSGDState and the ddph session."""

    def __init__(self, args, rank, world, folder):
        self.args, self.rank, self.world = args, rank, world
        self.ps = ps.PowerSGDState(None, matrix_approximation_rank=args.rank,
                                   start_powerSGD_iter=START, use_error_feedback=True,
                                   warm_start=True, random_seed=0)
        config = {"comm": {"backend": "gloo", "timeout": "60s"},
                  "hook": {"family": "powersgd", "name": "batched_powersgd",
                           "options": {"rank": args.rank, "start_iter": START,
                                       "error_feedback": True, "warm_start": True,
                                       "seed": 0}}}
        self.session = ddphooks.Session(config, rank=rank, world_size=world,
                                        rendezvous="file://" + folder, job="batched-parity")
        # A second PyTorch state, on inputs flipped in their last bit (--perturb).
        self.ps2 = ps.PowerSGDState(None, matrix_approximation_rank=args.rank,
                                    start_powerSGD_iter=START, use_error_feedback=True,
                                    warm_start=True, random_seed=0) if args.perturb else None
        self.step = 0
        self.first_of_step = True
        self.worst = {"out": 0.0, "p": 0.0, "q": 0.0, "error": 0.0}
        # Steps after a resync (both hooks from the same state): one step's difference.
        self.one_step = {"out": 0.0, "p": 0.0, "q": 0.0, "error": 0.0, "steps": 0}
        self.torch_vs_perturbed = 0.0
        self.drift = []
        self.first_bad = None
        self.svd = []


def comm_hook(st, bucket):
    buf = bucket.buffer()
    index, last = bucket.index(), bucket.is_last()
    x = buf.detach().clone()
    step = st.step
    resync = (st.args.resync_every and step >= START and step % st.args.resync_every == 0)
    if resync and st.first_of_step:
        st.session.load_state_dict(session_state_of(st.ps))
    if st.ps2 is not None:
        t2 = ps.batched_powerSGD_hook(st.ps2, Bucket(flip_last_bits(x, 1000 * step + index),
                                                      index, last)).wait().clone()
    # PyTorch's hook on a copy it may resize (it pads the buffer in place).
    t_out = ps.batched_powerSGD_hook(st.ps, Bucket(x.clone(), index, last)).wait().clone()
    d_out = x.clone()
    st.session.run(d_out, index=index, is_last=last, step=step)
    if step >= START:
        mem = psgd_memory(st.session)[index]
        diffs = {"out": rel(d_out.numpy(), t_out.numpy()),
                 "p": rel(mem[0], st.ps.p_memory_dict[index].numpy()),
                 "q": rel(mem[1], st.ps.q_memory_dict[index].numpy()),
                 "error": rel(mem[2], st.ps.error_dict[index].numpy())}
        into = st.one_step if resync else st.worst
        for k, v in diffs.items():
            into[k] = max(into[k], v)
        if resync:
            st.one_step["steps"] += 1
        elif st.first_bad is None and max(diffs.values()) > st.args.tolerance:
            st.first_bad = dict(step=step, bucket=index, **diffs)
        row = {"step": step, "bucket": index, "ddph_vs_torch_out": diffs["out"],
               "resynced": bool(resync)}
        if st.ps2 is not None:
            row["torch_vs_perturbed_torch_out"] = rel(t2.numpy(), t_out.numpy())
            st.torch_vs_perturbed = max(st.torch_vs_perturbed, row["torch_vs_perturbed_torch_out"])
        st.drift.append(row)
        if st.args.svd_every and step % st.args.svd_every == 0:
            st.svd.append(dict(step=step, bucket=index, **carried(x, bucket, st)))
    st.first_of_step = bool(last)
    if last:
        st.step += 1
    buf.copy_(t_out if st.args.follow == "torch" else d_out)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def worker(rank, world, folder, args):
    dist.init_process_group("gloo", init_method="file://" + folder + "/init", rank=rank,
                            world_size=world)
    torch.set_num_threads(1)
    x_train, y_train = fashion_mnist.load("train")
    x_test, y_test = fashion_mnist.load("test")
    x_train, x_test = torch.from_numpy(x_train), torch.from_numpy(x_test)
    if args.model == "mlp":
        x_train, x_test = x_train.reshape(-1, 784), x_test.reshape(-1, 784)
    y_train, y_test = torch.from_numpy(y_train), torch.from_numpy(y_test)

    torch.manual_seed(args.seed)
    net = models.MODELS[args.model]()
    ddp = DDP(net)
    st = Both(args, rank, world, folder)
    ddp.register_comm_hook(st, comm_hook)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    shard = Shard(x_train, y_train, rank, world, args.batch, args.seed)
    x_eval, y_eval = x_test[:args.eval_images], y_test[:args.eval_images]
    curve, window = [], []
    for step in range(1, args.steps + 1):
        xb, yb = shard.next()
        loss = loss_fn(ddp(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        window.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:
            acc = accuracy(net, x_eval, y_eval, rank, world)
            curve.append((step, sum(window) / len(window), acc))
            window = []
            if rank == 0:
                print("  step %4d  loss %10.4f  acc %.4f  worst rel. diff so far: out %.2e  "
                      "P %.2e  Q %.2e  error %.2e" % (step, curve[-1][1], acc, st.worst["out"],
                                                      st.worst["p"], st.worst["q"],
                                                      st.worst["error"]), flush=True)
    final = accuracy(net, x_test, y_test, rank, world)
    st.session.close()
    if rank == 0:
        summary = {"model": args.model, "world": world, "rank": args.rank, "steps": args.steps,
                   "follow": args.follow, "lr": args.lr, "seed": args.seed,
                   "torch": torch.__version__, "final_accuracy": final,
                   "worst_rel_diff": st.worst, "first_over_tolerance": st.first_bad,
                   "one_step_after_resync": st.one_step,
                   "torch_vs_perturbed_torch_worst": st.torch_vs_perturbed,
                   "tolerance": args.tolerance, "curve": curve, "rank1_share": st.svd,
                   "drift": st.drift,
}
        print(json.dumps({k: v for k, v in summary.items() if k not in ("curve", "drift")},
                         indent=1))
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(summary) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--rank", type=int, default=1, help="matrix_approximation_rank")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--follow", choices=("torch", "ddph"), default="torch",
                   help="whose output trains the model")
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-images", type=int, default=5000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--svd-every", type=int, default=50, help="0: no rank-1 shares")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="relative difference reported as the first one over it")
    p.add_argument("--resync-every", type=int, default=0,
                   help="every N steps, load PyTorch's state into the ddph session first, "
                        "so that step compares one step from the same state (0: never)")
    p.add_argument("--perturb", action="store_true",
                   help="also run PyTorch's hook on the inputs flipped in their last bit")
    p.add_argument("--out", help="append the summary as one JSON line")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(worker, args=(args.world, folder, args), nprocs=args.world)


if __name__ == "__main__":
    main()
