"""Parity of the ddph hooks, through ddphooks.torch, with PyTorch's own hooks.

Two ranks on CPU/Gloo run every case of parity_ranks.py once (one pair of
processes for the whole module, to keep the suite fast): 20 DDP steps of the
same model from the same seed, with PyTorch's hook and with ddph's. Each
test compares the final parameters on both ranks.
"""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks  # noqa: E402

WORLD = 2
FP32 = dict(rtol=0, atol=1e-6)  # fp32 round-off through 20 steps of PowerSGD/SGD


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("parity")
    cases = ",".join(parity_ranks.CASES)
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "parity_ranks.py"), str(r),
                               str(WORLD), str(out / "init"), str(out), cases],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(WORLD)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0].decode(errors="replace"))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("parity ranks ran past 240 s")
    if any(p.returncode != 0 for p in procs):
        pytest.fail("parity ranks failed:\n" + "\n".join(logs))

    def load(case):
        return [torch.load(str(out / ("%s.rank%d.pt" % (case, r)))) for r in range(WORLD)]
    return load


def both(runs, case):
    """(reference, ddph) parameters per rank, failing with either run's error."""
    results = runs(case)
    for r, res in enumerate(results):
        for key in ("ref_error", "ddph_error", "base_error"):
            assert key not in res, "rank %d, %s:\n%s" % (r, key, res[key])
    return results


def assert_bit_identical(runs, case):
    for r, res in enumerate(both(runs, case)):
        assert torch.equal(res["ref"], res["ddph"]), (
            "rank %d: max |diff| %g" % (r, (res["ref"] - res["ddph"]).abs().max()))


def assert_close(runs, case, **tol):
    for res in both(runs, case):
        torch.testing.assert_close(res["ddph"], res["ref"], **tol)


def test_allreduce_bit_identical_to_allreduce_hook(runs):
    assert_bit_identical(runs, "allreduce")


def test_allreduce_bit_identical_to_ddp_without_hook(runs):
    assert_bit_identical(runs, "allreduce_nohook")


def test_allreduce_with_gradient_as_bucket_view(runs):
    assert_bit_identical(runs, "allreduce_bucket_view")


def test_allreduce_with_no_sync_accumulation(runs):
    assert_bit_identical(runs, "allreduce_no_sync")


def test_allreduce_over_torch_process_group(runs):
    """comm: {backend: host}: the collectives run on DDP's own process group."""
    assert_bit_identical(runs, "allreduce_host_comm")


def test_fp16_compress_matches_fp16_compress_hook(runs):
    # Within fp16 tolerance is the promise; the same numerics make it exact.
    assert_close(runs, "fp16_compress", rtol=1e-3, atol=1e-3)


def test_noop_matches_noop_hook(runs):
    assert_bit_identical(runs, "noop")
    a, b = runs("noop")
    assert not torch.equal(a["ddph"], b["ddph"]), "noop must leave the ranks apart"


@pytest.mark.parametrize("case", ["powersgd_r1_warm", "powersgd_r1_cold", "powersgd_r2_warm",
                                  "powersgd_r2_cold"])
def test_powersgd_matches_powerSGD_hook(runs, case):
    assert_close(runs, case, **FP32)


def test_powersgd_state_beside_ddp_state_dict_resumes_like_pytorch(runs):
    """Checkpoint at step 10 (ddp.state_dict() and the hook's state_dict()
    beside it), resume in a fresh DDP:
    equal to PyTorch's PowerSGD resumed from its pickled state; and the
    control without the hook state is visibly off."""
    assert_close(runs, "powersgd_resume", **FP32)
    for res in both(runs, "powersgd_resume_without_state"):
        assert (res["ddph"] - res["ref"]).abs().max() > 100 * FP32["atol"]


def test_hook_then_optimizer_matches_functional_sgd(runs):
    assert_close(runs, "hook_then_optimizer", **FP32)


@pytest.mark.parametrize("case", ["zero_reduce_scatter", "zero_allreduce", "zero_host_comm",
                                  "zero_sharded_optimizer"])
def test_zero_matches_ddp_with_the_plain_optimizer(runs, case):
    """The zero hooks (each rank steps 1/world of AdamW's state) against
    DDP and torch.optim.AdamW on every parameter; through DDP's bucket
    rebuild after the first step."""
    assert_close(runs, case, **FP32)
    first = both(runs, case)[0]
    start = parity_ranks.flat_params(parity_ranks.make_model())
    assert (first["ddph"] - start).abs().max() > 1e-3, "the hook did not train"


def test_post_localsgd_matches_post_localSGD_hook(runs):
    assert_bit_identical(runs, "post_localsgd")
    a, b = runs("post_localsgd")
    assert not torch.equal(a["ddph"], b["ddph"]), "local SGD in subgroups of one keeps ranks apart"


def test_model_averaging_matches_periodic_model_averager(runs):
    """model_averaging around hook_then_optimizer around post_localsgd vs
    post_localSGD_hook, _FunctionalSGD and PeriodicModelAverager."""
    assert_close(runs, "model_averaging", **FP32)
    a, b = runs("model_averaging")
    assert not torch.equal(a["ddph"], b["ddph"]), "no average at the last step: ranks apart"


def test_post_localsgd_over_torch_process_group(runs):
    assert_bit_identical(runs, "post_localsgd_host_comm")


def test_per_tensor_matches_pytorch_formulas(runs):
    assert_bit_identical(runs, "per_tensor")


def test_per_tensor_over_torch_process_group(runs):
    assert_bit_identical(runs, "per_tensor_host_comm")


def test_powersgd_over_torch_process_group(runs):
    assert_close(runs, "powersgd_host_comm", **FP32)


def test_per_channel_matches_pytorch_formulas(runs):
    assert_bit_identical(runs, "per_channel")


def test_ddph_error_raises_from_backward(runs):
    for res in runs("nonfinite_error"):
        err = res.get("ddph_error", "")
        assert "DDPH_NONFINITE" in err and "backward" in err, err or "no error raised"


def test_bf16_compress_matches_pytorch_or_runs_where_it_fails(runs):
    """PyTorch 1.13's bf16 hook needs CUDA; PyTorch 2's runs on CPU/Gloo,
    and ddph's equals it there."""
    for res in runs("bf16_compress"):
        assert "ddph_error" not in res, res.get("ddph_error")
        if torch.__version__.startswith("1."):
            assert "CUDA" in res.get("ref_error", ""), "PyTorch 1.13's bf16 hook ran on CPU?"
        else:
            assert "ref_error" not in res, res["ref_error"]
            assert torch.equal(res["ddph"], res["ref"]), (
                "max |diff| %g" % (res["ddph"] - res["ref"]).abs().max())
        # bf16 keeps 8 bits of mantissa: within bf16 tolerance of DDP's fp32 average.
        torch.testing.assert_close(res["ddph"], res["base"], rtol=0, atol=1e-3)


def test_batched_powersgd_pytorch_fails_on_cpu_ddph_runs(runs):
    results = runs("batched_powersgd")
    for res in results:
        assert "AssertionError" in res.get("ref_error", ""), "PyTorch's batched hook works now?"
        assert "ddph_error" not in res, res.get("ddph_error")
        assert torch.isfinite(res["ddph"]).all()
        # Rank-1 compression with error feedback stays near the plain average.
        assert (res["ddph"] - res["base"]).abs().max() < 0.05
    assert torch.equal(results[0]["ddph"], results[1]["ddph"]), "ranks must agree"
