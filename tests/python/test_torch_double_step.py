"""A parameter stepped by a ddph hook (sharded_optimizer, optimizer_in_backward)
and by the user's own torch.optim optimizer would move twice. PyTorch 2
refuses the second step before it moves anything (torch.optim's global step
pre-hooks); 1.13 has none, so the second step is warned about at the next
forward, once (parameter version counters). One process, a world of 1 on
Gloo."""
import os
import sys
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402
import ddphooks.errors  # noqa: E402
import ddphooks.torch  # noqa: E402

HOST = {"backend": "host"}  # DDP's own process group: no second rendezvous


pytestmark = pytest.mark.usefixtures("gloo_world_of_one")
TORCH_1 = torch.__version__.startswith("1.")
refusing = pytest.mark.skipif(TORCH_1, reason="torch.optim has global step hooks from PyTorch "
                              "2 on (this is %s)" % torch.__version__)
warning = pytest.mark.skipif(not TORCH_1, reason="PyTorch %s refuses the second step; the "
                             "warning is 1.13's" % torch.__version__)


def backward(ddp, no_sync=False):
    x, y = pr.batches(0)[0]
    if no_sync:
        with ddp.no_sync():
            nn.functional.mse_loss(ddp(x), y).backward()
    else:
        nn.functional.mse_loss(ddp(x), y).backward()


def params(model):
    return pr.flat_params(model)


@refusing
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


@refusing
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


def forward_warnings(ddp):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backward(ddp)
    return [str(w.message) for w in caught if "changed in place" in str(w.message)]


@warning
def test_on_1_13_a_second_step_is_warned_about_once_at_the_next_forward():
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.sharded_optimizer(ddp, "adamw", lr=0.01, comm=HOST)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    assert forward_warnings(ddp) == []  # the hook's own steps leave no trace
    assert forward_warnings(ddp) == []
    opt.step()
    said = forward_warnings(ddp)
    assert len(said) == 1, said
    assert "parameters 0-5" in said[0] and "sharded_optimizer" in said[0], said[0]
    opt.step()
    assert forward_warnings(ddp) == []  # once
    hook.close()


@warning
def test_on_1_13_optimizer_in_backward_warns_only_for_a_step_that_moved_something():
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.optimizer_in_backward(ddp, "sgd", lr=0.05, comm=HOST)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    assert forward_warnings(ddp) == []
    opt.step()  # every .grad is None after the backward: torch.optim moves nothing
    assert forward_warnings(ddp) == []
    x, y = pr.batches(0)[0]
    with ddp.no_sync():  # gradients accumulate, the hook has not stepped yet
        nn.functional.mse_loss(ddp(x), y).backward()
    opt.step()
    said = forward_warnings(ddp)
    assert len(said) == 1 and "optimizer_in_backward" in said[0], said
    hook.close()


@warning
def test_on_1_13_loading_the_model_restarts_the_watch_without_a_warning():
    model = pr.make_model()
    ddp = DDP(model, bucket_cap_mb=0.01)
    hook = ddphooks.torch.sharded_optimizer(ddp, "adamw", lr=0.01, comm=HOST)
    assert forward_warnings(ddp) == []
    ddp.load_state_dict(ddp.state_dict())  # copies into the parameters in place
    assert forward_warnings(ddp) == []
    hook.close()
