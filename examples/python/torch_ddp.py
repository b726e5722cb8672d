#!/usr/bin/env python3
"""A PyTorch DDP training script where one line switches to the ddph hooks.

    python3 examples/python/torch_ddp.py                          # 2 ranks, PyTorch's fp16 hook
    python3 examples/python/torch_ddp.py --ddph configs/fp16.yaml # the same through ddph
    torchrun --nproc_per_node 2 --redirects 2 --tee 2 examples/python/torch_ddp.py --ddph configs/powersgd.yaml

(Debian's torchrun 1.13 on Python 3.11 fails with "'NoneType' object has no
attribute 'get'" unless --redirects and --tee are 1 or 2: Python 3.11 no
longer iterates the 0 and 3 members of its Std flag.)

Trains a small MLP on a synthetic regression task on CPU/Gloo (CUDA/NCCL
when --cuda and GPUs are there), prints the loss, and saves a checkpoint:
with ddph each rank's hook state (PowerSGD's error feedback, say) in a
file of its own beside ddp.state_dict(), which stays the model's alone, so
it loads into a plain model. Without torchrun it starts --world processes itself.
"""
import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))  # a source checkout; an install needs nothing
import ddphooks.torch  # noqa: E402


def make_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 1))


def train(rank, world, args):
    device = torch.device("cuda", rank) if args.cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = make_model().to(device)
    ddp = DDP(model, device_ids=[rank] if args.cuda else None)

    if args.ddph:
        hook = ddphooks.torch.register(ddp, args.ddph)  # <- the one line that switches
    else:
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)

    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data shard
    w_true = torch.randn(64, 1, generator=torch.Generator().manual_seed(7))
    for step in range(args.steps):
        x = torch.randn(128, 64, generator=g)
        y = x @ w_true + 0.01 * torch.randn(128, 1, generator=g)
        loss = nn.functional.mse_loss(ddp(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and (step % 20 == 0 or step == args.steps - 1):
            print("step %4d  loss %.5f" % (step, loss.item()), flush=True)

    path = args.checkpoint or os.path.join(tempfile.gettempdir(), "torch_ddp_example.pt")
    if args.ddph:
        # Every rank saves its own hook state: PowerSGD's error feedback and a
        # zero rank's optimizer shard differ from rank to rank. Resume with
        # hook.load_state_dict(torch.load(path + ".ddph.rank%d" % rank)).
        torch.save(hook.state_dict(), path + ".ddph.rank%d" % rank)
    if rank == 0:
        checkpoint = {"model": ddp.state_dict(), "optimizer": opt.state_dict()}
        torch.save(checkpoint, path)
        print("checkpoint saved to %s%s" % (
            path, " (and the ddph hook state, one file per rank: %s.ddph.rank*)" % path
            if args.ddph else ""))
        # The model's part loads into a plain model, without DDP or ddphooks.
        state = torch.load(path)["model"]
        nn.modules.utils.consume_prefix_in_state_dict_if_present(state, "module.")
        make_model().load_state_dict(state)  # strict: an extra key would raise
        print("the checkpoint's model loads into a plain model")
        if args.ddph:
            print("ddph stats:", hook.stats())


def worker(rank, world, init_file, args):
    dist.init_process_group("nccl" if args.cuda else "gloo", init_method="file://" + init_file,
                            rank=rank, world_size=world)
    try:
        train(rank, world, args)
        # Every rank waits for the others (rank 0 still saves the checkpoint)
        # before any tears its process group down: under PyTorch 2.15, rank
        # 1's Gloo teardown while rank 0 was still saving once ended in
        # std::terminate ("terminate called without an active exception").
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ddph", metavar="CONFIG", help="a ddph YAML config (else PyTorch's hook)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--world", type=int, default=2, help="ranks to start without torchrun")
    p.add_argument("--cuda", action="store_true", help="one GPU per rank, NCCL")
    p.add_argument("--checkpoint", help="where rank 0 saves the model (default: the temp dir); each rank its hook state beside it")
    args = p.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        dist.init_process_group("nccl" if args.cuda else "gloo")
        try:
            train(dist.get_rank(), dist.get_world_size(), args)
            dist.barrier()  # as in worker(): no rank tears down while another works
        finally:
            dist.destroy_process_group()
        return
    with tempfile.TemporaryDirectory() as d:
        torch.multiprocessing.spawn(worker, args=(args.world, os.path.join(d, "init"), args),
                                    nprocs=args.world)


if __name__ == "__main__":
    main()
