"""One process of test_torch_zero.py: a DDP model on a Gloo world of 2 or 3,
trained with ddphooks.torch.sharded_optimizer (each rank 1/world of AdamW's
state) or, for the reference, with torch.optim.AdamW on every parameter.

    zero_resume_rank.py RANK WORLD INIT_FILE OUT_DIR PHASE
PHASE "first": steps 0..4 from the seed, saving the model and the ddph
shard (and the reference's optimizer state) per rank.
PHASE "resume": steps 5..9 from rank 0's saved model, the consolidated
ddph state OUT_DIR/joined.pt (the reference: rank 0's AdamW state), and
"fresh": the same without any optimizer state (the control).
"""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ddphooks.torch  # noqa: E402

OPTIONS = dict(lr=0.01, weight_decay=0.01)


def make_model():
    torch.manual_seed(5)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def run(rank, steps, model_state, ddph_state, ref_state, use_ddph):
    model = make_model()
    if model_state is not None:
        model.load_state_dict(model_state)
    # Small buckets, which DDP rebuilds after its first step.
    ddp = DDP(model, bucket_cap_mb=0.002)
    if use_ddph:
        hook = ddphooks.torch.sharded_optimizer(ddp, "adamw", **OPTIONS)
        if ddph_state is not None:
            hook.load_state_dict(ddph_state)
        opt = None
    else:
        hook = None
        opt = torch.optim.AdamW(model.parameters(), foreach=False, **OPTIONS)
        if ref_state is not None:
            opt.load_state_dict(ref_state)
    for step in steps:
        x, y = batch(rank, step)
        nn.functional.mse_loss(ddp(x), y).backward()
        if opt is not None:
            opt.step()
        model.zero_grad()
    return model, hook, opt


def main():
    rank, world, init_file, out, phase = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                          sys.argv[4], sys.argv[5])
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    torch.set_num_threads(1)
    if phase == "first":
        model, hook, _ = run(rank, range(5), None, None, None, True)
        torch.save({"model": model.state_dict(), "ddph": hook.state_dict()},
                   os.path.join(out, "first.rank%d.pt" % rank))
        hook.close()
        model, _, opt = run(rank, range(5), None, None, None, False)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                   os.path.join(out, "ref_first.rank%d.pt" % rank))
    else:
        saved = torch.load(os.path.join(out, "first.rank0.pt"))
        ref = torch.load(os.path.join(out, "ref_first.rank0.pt"))
        joined = torch.load(os.path.join(out, "joined.pt")) if phase == "resume" else None
        model, hook, _ = run(rank, range(5, 10), saved["model"], joined, None, True)
        hook.close()
        ref_model, _, _ = run(rank, range(5, 10), ref["model"], None,
                              ref["opt"] if phase == "resume" else None, False)
        flat = lambda m: torch.cat([p.detach().reshape(-1) for p in m.parameters()])  # noqa
        torch.save({"ddph": flat(model), "ref": flat(ref_model)},
                   os.path.join(out, "%s.rank%d.pt" % (phase, rank)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
