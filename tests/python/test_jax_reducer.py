"""ddphooks.jax.GradientReducer on 2 CPU ranks (JAX, no PyTorch): the
allreduce mean bit for bit against NumPy's exact mean and JAX's own
cross-process pmean; refusals; error feedback across a checkpoint;
PowerSGD on the pytree's matrices; the zero hook's AdamW against optax."""
import os
import socket
import sys

import pytest

np = pytest.importorskip("numpy", reason="NumPy is not installed")
jax = pytest.importorskip("jax", reason="JAX is not installed: ./build.sh python makes "
                          "build/python-jax, which ctest runs these tests with")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jax_ranks  # noqa: E402
import ranks  # noqa: E402

CASES = ["allreduce", "pytree_mismatch", "bad_dtype", "resume", "powersgd", "zero_adamw"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def world2(tmp_path_factory):
    return ranks.spawn("jax_ranks.py", 2, tmp_path_factory.mktemp("jax2"), ",".join(CASES),
                       0, saved="pkl")


@pytest.fixture(scope="module")
def pmean2(tmp_path_factory):
    return ranks.spawn("jax_ranks.py", 2, tmp_path_factory.mktemp("pmean2"), "jax_pmean",
                       free_port(), saved="pkl")


def leaves(tree):
    return jax.tree_util.tree_leaves(tree)


def exact_mean(step):
    """NumPy's mean of the 2 ranks' gradients: (a + b) / 2 in float32, one
    rounding (a sum of two floats, halved exactly)."""
    per_rank = [leaves(jax_ranks.numpy_gradients(r, step)) for r in range(2)]
    return [np.mean(np.stack(pair), axis=0, dtype=np.float32) for pair in zip(*per_rank)]


def test_allreduce_is_numpys_exact_mean_bit_for_bit(world2):
    runs = world2("allreduce")
    for step in range(2):
        want = exact_mean(step)
        for r in range(2):
            got = leaves(runs[r]["out"][step])
            assert len(got) == len(want) == 6
            for a, b in zip(got, want):
                assert a.dtype == np.float32 and a.shape == b.shape
                assert np.array_equal(a, b), "max |ddph - mean| %g" % np.abs(a - b).max()
    # Several buckets of at most 0.004 MB, every leaf handed back without a
    # copy (64-byte aligned, adopted through DLPack).
    assert runs[0]["stats"]["buckets"] == 3 * 3  # [dense.b], [dense.w], [out, stack...]
    assert runs[0]["aligned"] and runs[1]["aligned"]


def test_allreduce_equals_jaxs_own_cross_process_pmean(world2, pmean2):
    ours, theirs = world2("allreduce"), pmean2("jax_pmean")
    for step in range(2):
        for r in range(2):
            for a, b in zip(leaves(ours[r]["out"][step]), leaves(theirs[r]["out"][step])):
                assert np.array_equal(a, b), "max |ddph - pmean| %g" % np.abs(a - b).max()


def test_a_pytree_that_differs_between_ranks_is_refused_on_both(world2):
    for r, res in enumerate(world2("pytree_mismatch")):
        assert res["raised"] and "gradient pytree" in res["raised"], (r, res)
        assert "rank 1" in res["raised"], res["raised"]


def test_an_integer_leaf_is_refused_by_its_path_before_anything_is_sent(world2):
    for res in world2("bad_dtype"):
        assert res["raised"] and "['steps']" in res["raised"] and "int32" in res["raised"], res
        assert res["buckets"] == 0


def test_error_feedback_resumes_exactly_from_the_saved_state(world2):
    for res in world2("resume"):
        assert res["state_bytes"] > 0
        for whole, resumed in zip(res["whole"][1:], res["resumed"]):
            for a, b in zip(leaves(whole), leaves(resumed)):
                assert np.array_equal(a, b)
        # Without the state the residuals start afresh: the result moves.
        moved = max(float(np.abs(a - b).max())
                    for a, b in zip(leaves(res["whole"][1]), leaves(res["fresh"][0])))
        assert moved > 0


def test_powersgd_compresses_the_pytrees_matrices(world2):
    for res in world2("powersgd"):
        st = res["stats"]
        # Steps 0 and 1 are plain allreduce (start_iter 2); at step 2 the
        # 64x48 and 48x10 matrices travel as (n + m) * 2 values, the rest whole.
        per_step = st["bytes_in"] // 3
        compressed = st["bytes_out"] - 2 * per_step
        assert compressed < per_step / 4, st
        assert all(np.isfinite(leaf).all() for leaf in leaves(res["out"]))
    assert all(np.array_equal(a, b) for a, b in zip(leaves(world2("powersgd")[0]["out"]),
                                                    leaves(world2("powersgd")[1]["out"])))


def test_the_zero_hooks_adamw_steps_as_optax_adamw_on_the_mean(world2):
    for res in world2("zero_adamw"):
        for name in ("w", "b"):
            np.testing.assert_allclose(res["ours"][name], res["optax"][name], rtol=0, atol=2e-6)


@pytest.mark.parametrize("cap", [0, -1.0, float("nan"), float("inf"), True, "25"])
def test_a_bucket_cap_that_is_not_a_positive_number_is_refused_before_opening(cap):
    import ddphooks.errors
    import ddphooks.jax
    with pytest.raises(ddphooks.errors.DDPHError, match="bucket_cap_mb is .*positive number"):
        ddphooks.jax.GradientReducer({"hook": {"family": "default", "name": "allreduce"}},
                                     rank=0, world_size=1, bucket_cap_mb=cap)
