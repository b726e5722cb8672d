"""One process of test_torch_checkpoint.py: a world of one (Gloo), a DDP model
with a ddph hook, and its checkpoints.

    checkpoint_rank.py INIT_FILE
"""
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ddphooks.torch  # noqa: E402

CONFIG = {"hook": {"family": "default", "name": "allreduce"}}


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def trained(steps, config=CONFIG):
    """A DDP model with the hook, after `steps` steps, and its hook."""
    ddp = DDP(make_model())
    hook = ddphooks.torch.register(ddp, config)
    for _ in range(steps):
        ddp(torch.randn(4, 8)).sum().backward()
    return ddp, hook


PSGD = {"hook": {"family": "powersgd", "name": "powersgd",
                 "options": {"rank": 1, "start_iter": 2}}}


def resume_warnings(config, load_hook, hook_first=False):
    """The resume warnings of two steps of a model restored from a checkpoint
    (with or without the hook's state)."""
    ddp, hook = trained(3, config)
    model_state, hook_state = ddp.state_dict(), hook.state_dict()
    hook.close()
    ddp2, hook2 = trained(0, config)
    if load_hook and hook_first:
        hook2.load_state_dict(hook_state)
    ddp2.load_state_dict(model_state)
    if load_hook and not hook_first:
        hook2.load_state_dict(hook_state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            ddp2(torch.randn(4, 8)).sum().backward()
    hook2.close()
    return [str(w.message) for w in caught if "hook.load_state_dict()" in str(w.message)]


def main():
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
    ddp, hook = trained(3)
    assert hook.step == 3, hook.step

    # The model's state is the model's alone: a plain model takes it, strictly.
    model_state = ddp.state_dict()
    assert ddphooks.torch.LEGACY_STATE_KEY not in model_state, list(model_state)
    plain = dict(model_state)
    nn.modules.utils.consume_prefix_in_state_dict_if_present(plain, "module.")
    make_model().load_state_dict(plain)

    # The hook's state beside it resumes the step count.
    hook_state = hook.state_dict()
    ddp2, hook2 = trained(0)
    ddp2.load_state_dict(model_state)
    hook2.load_state_dict(hook_state)
    assert hook2.step == 3, hook2.step

    # A checkpoint of an older version (the hook state inside the DDP state
    # dict) still loads into a model with a registered hook.
    blob = (5).to_bytes(8, "little") + hook.session.state_dict()
    legacy = dict(model_state)
    legacy[ddphooks.torch.LEGACY_STATE_KEY] = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
    ddp3, hook3 = trained(0)
    ddp3.load_state_dict(legacy)  # strict: the key must have been taken out
    assert hook3.step == 5, hook3.step
    for h in (hook, hook2, hook3):
        h.close()

    # A model resumed without its hook's state, with a hook that keeps state,
    # is warned about once, at its first step; not when both are loaded (in
    # either order), nor for a hook without state.
    assert len(resume_warnings(PSGD, load_hook=False)) == 1
    assert resume_warnings(PSGD, load_hook=True) == []
    assert resume_warnings(PSGD, load_hook=True, hook_first=True) == []
    assert resume_warnings(CONFIG, load_hook=False) == []
    dist.destroy_process_group()
    print("ok")


if __name__ == "__main__":
    main()
