"""A parameter stepped by a ddph hook (sharded_optimizer, optimizer_in_backward)
and by the user's own torch.optim optimizer would move twice: the second
step is refused (PyTorch 2's global optimizer step hooks; 1.13 has none).
One process, a world of 1 on Gloo."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if torch.__version__.startswith("1."):
    pytest.skip("torch.optim has global step hooks from PyTorch 2 on (this is %s)"
                % torch.__version__, allow_module_level=True)
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402
import ddphooks.errors  # noqa: E402
import ddphooks.torch  # noqa: E402

HOST = {"backend": "host"}  # DDP's own process group: no second rendezvous


pytestmark = pytest.mark.usefixtures("gloo_world_of_one")


def backward(ddp, no_sync=False):
    x, y = pr.batches(0)[0]
    if no_sync:
        with ddp.no_sync():
            nn.functional.mse_loss(ddp(x), y).backward()
    else:
        nn.functional.mse_loss(ddp(x), y).backward()


def params(model):
    return pr.flat_params(model)


def test_sharded_optimizer_then_the_users_step_is_refused_before_anything_moves():
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.sharded_optimizer(ddp, "adamw", lr=0.01, comm=HOST)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    backward(ddp)
    before = params(model)
    with pytest.raises(ddphooks.errors.DDPHError) as e:
        opt.step()
    text = str(e.value)
    assert "AdamW.step()" in text and "sharded_optimizer" in text and "twice" in text, text
    assert "parameters 0-5" in text, text  # the parity model's 6 tensors
    assert torch.equal(params(model), before), "the refused step moved parameters"
    hook.close()
    opt.step()  # closed: the hook steps nothing, so the user's optimizer may
    assert not torch.equal(params(model), before)


def test_optimizer_in_backward_leaves_nothing_to_step_twice_except_after_no_sync():
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.optimizer_in_backward(ddp, "sgd", lr=0.05, comm=HOST)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    backward(ddp)
    stepped = params(model)
    opt.step()  # every .grad is None after the backward: torch.optim moves nothing
    assert torch.equal(params(model), stepped)
    backward(ddp, no_sync=True)  # gradients accumulate, the hook has not stepped yet
    with pytest.raises(ddphooks.errors.DDPHError, match="SGD.step.*optimizer_in_backward"):
        opt.step()
    hook.close()


def test_a_hook_that_steps_nothing_leaves_the_users_optimizer_alone():
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.register(ddp, {"comm": HOST,
                                         "hook": {"family": "default", "name": "allreduce"}})
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    backward(ddp)
    before = params(model)
    opt.step()
    assert not torch.equal(params(model), before)
    hook.close()


def test_an_optimizer_of_other_parameters_is_left_alone():
    model = pr.make_model()
    other = nn.Linear(4, 4)
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.sharded_optimizer(ddp, "adamw", lr=0.01, comm=HOST)
    opt = torch.optim.SGD(other.parameters(), lr=0.1)
    other(torch.ones(1, 4)).sum().backward()
    backward(ddp)
    w = other.weight.detach().clone()
    opt.step()
    assert not torch.equal(other.weight, w)
    hook.close()
