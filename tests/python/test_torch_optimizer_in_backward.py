"""ddphooks.torch.optimizer_in_backward against PyTorch's optimizer in
backward (torch.distributed.optim._apply_optimizer_in_backward with DDP).

Worlds of 2 and 3 ranks on CPU/Gloo run optim_in_backward_ranks.py once
each: SGD (momentum, weight decay), Adam and AdamW, 20 steps of the parity
model over several DDP buckets, the ranks on different data; and AdamW
under fp16 compression, which PyTorch refuses beside its in-backward
optimizer.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ranks  # noqa: E402

# ddph's optimizers round like torch.optim, not bit for bit (docs/optimizer_overlap.md,
# Numerics): the C++ parity test's bound. 5e-8 seen here after 20 steps.
OPTIM = dict(rtol=1e-5, atol=2e-6)
# Under fp16 compression a last-bit difference in a parameter can round a
# later fp16 gradient the other way: 3.1e-6 seen.
OPTIM_FP16 = dict(rtol=1e-5, atol=1e-5)
NO_PYTORCH_IN_BACKWARD = torch.__version__.startswith("1.")


def run_world(tmp_path_factory, world):
    return ranks.spawn("optim_in_backward_ranks.py", world,
                       tmp_path_factory.mktemp("optim_in_backward_%d" % world))


@pytest.fixture(scope="module", params=[2, 3], ids=["world2", "world3"])
def runs(request, tmp_path_factory):
    return run_world(tmp_path_factory, request.param)


@pytest.mark.skipif(NO_PYTORCH_IN_BACKWARD,
                    reason="PyTorch 1.13's DDP has no optimizer in backward to compare with")
@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_equals_pytorchs_optimizer_in_backward(runs, optimizer):
    ref, ddph = runs("ref_" + optimizer), runs("ddph_" + optimizer)
    for a, b in zip(ref, ddph):
        torch.testing.assert_close(b["params"], a["params"], **OPTIM)
    for res in ddph[1:]:
        assert torch.equal(res["params"], ddph[0]["params"]), "ranks apart"


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_trains_and_leaves_no_gradient(runs, optimizer):
    """The rank script asserts after every backward that each .grad is None
    (as PyTorch's leaves them); a run that raised would be in "error"."""
    import parity_ranks
    start = parity_ranks.flat_params(parity_ranks.make_model())
    for res in runs("ddph_" + optimizer):
        assert not torch.equal(res["params"], start), "no step was taken"


@pytest.mark.skipif(NO_PYTORCH_IN_BACKWARD,
                    reason="PyTorch 1.13's DDP has no optimizer in backward to compare with")
def test_pytorch_refuses_a_comm_hook_beside_it(runs):
    for res in runs("ref_fp16_hook_refused", ok=False):
        assert "can only be called once" in res.get("error", ""), res


def test_ddph_runs_it_after_fp16_compression(runs):
    """optimizer_in_backward(wrap=fp16_compress) equals PyTorch's
    fp16_compress_hook with AdamW stepped after the backward."""
    ref, ddph = runs("step_after_fp16_adamw"), runs("ddph_fp16_adamw")
    for a, b in zip(ref, ddph):
        torch.testing.assert_close(b["params"], a["params"], **OPTIM_FP16)


def test_torch_optims_spelling_is_taken_and_other_optimizers_refused():
    from ddphooks.torch import _optim
    import ddphooks.errors
    assert _optim.ddph_options(torch.optim.Adam, {"betas": (0.8, 0.99), "lr": 0.1}) == (
        "adam", {"beta1": 0.8, "beta2": 0.99, "lr": 0.1})
    assert _optim.ddph_options("AdamW", {}) == ("adamw", {})
    with pytest.raises(ddphooks.errors.DDPHError, match="RMSprop is not one ddph steps"):
        _optim.ddph_options(torch.optim.RMSprop, {})
    with pytest.raises(ddphooks.errors.DDPHError, match="betas or beta1/beta2, not both"):
        _optim.ddph_options("adam", {"betas": (0.9, 0.99), "beta1": 0.9})
