"""ddphooks.Session from NumPy and DLPack buffers: results against NumPy's
own arithmetic, errors as DDPHError, stats, and the state round trip."""
import os
import subprocess
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

import ddphooks  # noqa: E402  (conftest puts python/ on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ALLREDUCE = {"hook": {"family": "default", "name": "allreduce"}}


@pytest.fixture
def store_dir(tmp_path):
    return "file://" + str(tmp_path / "store")


def solo(config, store_dir):
    return ddphooks.Session(config, rank=0, world_size=1, rendezvous=store_dir)


def test_version_and_library():
    assert ddphooks.version().startswith("1.")
    assert os.path.isfile(ddphooks.library_path())


def test_a_world_of_one_needs_no_rendezvous():
    with ddphooks.Session(ALLREDUCE, rank=0, world_size=1) as s:
        a = np.linspace(-3, 3, 101, dtype=np.float32)
        want = a.copy()
        s.run(a)
        np.testing.assert_array_equal(a, want)


def test_run_with_parameter_shapes_gives_layerwise_powersgd_its_matrices():
    """With params, PowerSGD sees a 64 x 32 matrix and sends its rank-1
    approximation; without, the bucket is one flat vector it cannot compress."""
    config = {"hook": {"family": "powersgd", "name": "powersgd",
                       "options": {"rank": 1, "start_iter": 0, "error_feedback": False,
                                   "warm_start": False}}}
    rng = np.random.default_rng(3)
    grad = rng.standard_normal(64 * 32 + 10).astype(np.float32)
    with ddphooks.Session(config, rank=0, world_size=1) as s:
        flat = grad.copy()
        s.run(flat)
        np.testing.assert_array_equal(flat, grad)  # nothing to compress
        layered = grad.copy()
        s.run(layered, params=[(64, 32), (10,)])
        matrix = layered[:64 * 32].reshape(64, 32)
        assert not np.allclose(matrix, grad[:64 * 32].reshape(64, 32))
        singular = np.linalg.svd(matrix, compute_uv=False)
        assert singular[1] < 1e-4 * singular[0], singular[:3]  # rank 1
        np.testing.assert_array_equal(layered[64 * 32:], grad[64 * 32:])  # a vector travels whole


def test_run_with_parameter_arrays_lets_hook_then_optimizer_step_them():
    config = {"hook": {"family": "optimizer_overlap", "name": "hook_then_optimizer",
                       "options": {"optimizer": "sgd", "lr": 0.5},
                       "wrap": {"family": "default", "name": "allreduce"}}}
    w1 = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    w2 = np.full(3, 2.0, dtype=np.float32)
    grad = np.linspace(-1, 1, 9, dtype=np.float32) * 4  # steps of 1: exact in float32
    want1 = w1 - 0.5 * grad[:6].reshape(2, 3)
    want2 = w2 - 0.5 * grad[6:]
    with ddphooks.Session(config, rank=0, world_size=1) as s:
        s.run(grad.copy(), params=[w1, w2], param_ids=[0, 1])
    np.testing.assert_array_equal(w1, want1)
    np.testing.assert_array_equal(w2, want2)


def test_run_refuses_params_past_the_buffer():
    with ddphooks.Session(ALLREDUCE, rank=0, world_size=1) as s:
        with pytest.raises(ValueError, match=r"params\[1\] \(shape \(5,\)\) ends at element 9"):
            s.run(np.zeros(8, np.float32), params=[(4,), (5,)])
        with pytest.raises(ValueError, match="param_ids has 1 entries for 2 params"):
            s.run(np.zeros(8, np.float32), params=[(4,), (4,)], param_ids=[0])


def test_param_offsets_place_each_gradient_where_the_host_put_it():
    """hook_then_optimizer steps w1 and w2 from their gradients at offsets 0
    and 8 (the 2 elements between are a gap), not from the next block."""
    config = {"hook": {"family": "optimizer_overlap", "name": "hook_then_optimizer",
                       "options": {"optimizer": "sgd", "lr": 1.0},
                       "wrap": {"family": "default", "name": "allreduce"}}}
    w1, w2 = np.zeros(6, np.float32), np.zeros(3, np.float32)
    grad = np.arange(11, dtype=np.float32)
    with ddphooks.Session(config, rank=0, world_size=1) as s:
        s.run(grad.copy(), params=[w1, w2], param_offsets=[0, 8])
        np.testing.assert_array_equal(w1, -grad[:6])
        np.testing.assert_array_equal(w2, -grad[8:])
        with pytest.raises(ValueError, match=r"param_offsets\[1\] is 4, inside params\[0\]"):
            s.run(grad.copy(), params=[(6,), (3,)], param_offsets=[0, 4])
        with pytest.raises(ValueError, match="param_offsets has 1 entries for 2 params"):
            s.run(grad.copy(), params=[(6,), (3,)], param_offsets=[0])


def test_agree_in_a_world_of_one_gathers_and_passes():
    with ddphooks.Session(ALLREDUCE, rank=0, world_size=1) as s:
        s.agree("the layout", b"\x01" * 32)  # a world of one agrees with itself


def test_a_bad_rendezvous_from_the_program_is_named_as_such():
    with pytest.raises(ddphooks.DDPHError, match="the rendezvous 'ftp://x' the program gave "
                                                  r"\(it overrides comm.rendezvous\) is not"):
        ddphooks.Session(ALLREDUCE, rank=0, world_size=1, rendezvous="ftp://x")


def test_numpy_run_in_place_world_1(store_dir):
    with solo(ALLREDUCE, store_dir) as s:
        a = np.linspace(-3, 3, 1001, dtype=np.float32)
        want = a.copy()
        assert s.run(a) is a
        np.testing.assert_array_equal(a, want)  # the mean over one rank
        b = np.arange(12, dtype=np.float32).reshape(3, 4)  # any contiguous shape
        s.run(b)
        np.testing.assert_array_equal(b, np.arange(12, dtype=np.float32).reshape(3, 4))
        st = s.stats()
    assert st["steps"] == 2 and st["buckets"] == 2
    assert st["bytes_in"] == (1001 + 12) * 4


def test_fp16_compress_rounds_like_numpy(store_dir):
    cfg = {"hook": {"family": "default", "name": "fp16_compress"}}
    with solo(cfg, store_dir) as s:
        a = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
        want = a.astype(np.float16).astype(np.float32)  # one rank: cast there and back
        s.run(a)
        np.testing.assert_array_equal(a, want)
        assert s.stats()["bytes_out"] == 4096 * 2


def test_config_as_yaml_text_and_path(store_dir, tmp_path):
    text = "hook: {family: default, name: allreduce}\n"
    with solo(text, store_dir) as s:
        s.run(np.ones(4, np.float32))
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with solo(str(path), store_dir) as s:
        s.run(np.ones(4, np.float32))
    with solo(path, store_dir) as s:  # os.PathLike
        s.run(np.ones(4, np.float32))


def test_dlpack_torch_tensor_in_place(store_dir):
    torch = pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
    cfg = {"hook": {"family": "default", "name": "fp16_compress"}}
    with solo(cfg, store_dir) as s:
        t = torch.randn(3, 100, generator=torch.Generator().manual_seed(1))
        want = t.half().float()
        s.run(t)
        assert torch.equal(t, want)


def test_errors_carry_code_and_message(store_dir, tmp_path):
    with pytest.raises(ddphooks.DDPHError) as e:
        solo({"hook": {"family": "default", "name": "nope"}}, store_dir)
    assert e.value.code == ddphooks.Code.NOT_FOUND
    assert "has no hook 'nope'" in e.value.message and "allreduce" in e.value.message
    with pytest.raises(ddphooks.DDPHError) as e:
        solo({"hook": {"family": "default", "name": "allreduce", "options": {"rank": 2}}},
             store_dir)
    assert e.value.code == ddphooks.Code.INVALID_ARGUMENT
    assert "hook.options.rank" in e.value.message
    with pytest.raises(ddphooks.DDPHError) as e:
        solo(str(tmp_path / "missing.yaml"), store_dir)
    assert "missing.yaml" in e.value.message
    with pytest.raises(ddphooks.DDPHError) as e:
        ddphooks.Session(ALLREDUCE, rank=2, world_size=2, rendezvous=store_dir)
    assert e.value.code == ddphooks.Code.INVALID_ARGUMENT and "rank 2" in e.value.message


def test_bad_buffers_are_refused(store_dir):
    with solo(ALLREDUCE, store_dir) as s:
        with pytest.raises(ValueError, match="contiguous"):
            s.run(np.zeros(8, np.float32)[::2])
        ro = np.zeros(8, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            s.run(ro)
        with pytest.raises(TypeError):
            s.run([1.0, 2.0])
        with pytest.raises(ddphooks.DDPHError) as e:
            s.run(np.zeros(8, np.int16))
        assert e.value.code in (ddphooks.Code.UNSUPPORTED, ddphooks.Code.INVALID_ARGUMENT)
        s.run(np.zeros(8, np.float32))  # the session still works
    with pytest.raises(ValueError, match="closed"):
        s.run(np.zeros(8, np.float32))


def test_state_dict_round_trip(store_dir):
    cfg = {"hook": {"family": "quantization", "name": "per_channel",
                    "options": {"protocol": "reduce_scatter", "bits": 4,
                                "error_feedback": True}}}
    rng = np.random.default_rng(2)
    with solo(cfg, store_dir + "a") as s:
        for _ in range(3):
            s.run(rng.standard_normal(2048).astype(np.float32))
        blob = s.state_dict()
    assert isinstance(blob, bytes) and len(blob) > 2048  # residuals of 2048 elements
    with solo(cfg, store_dir + "b") as s2:
        s2.load_state_dict(blob)
        assert s2.state_dict() == blob
        with pytest.raises(ddphooks.DDPHError) as e:
            s2.load_state_dict(blob[:-5])
        assert e.value.code == ddphooks.Code.INVALID_ARGUMENT


def test_library_not_found_names_the_path():
    code = "import ddphooks; ddphooks.version()"
    env = dict(os.environ, DDPH_LIBRARY="/nonexistent/libddph.so",
               PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "/nonexistent/libddph.so" in r.stderr


def test_two_ranks_numpy_example():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python",
                                                     "numpy_allreduce.py")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0: ok" in r.stdout and "rank 1: ok" in r.stdout


def test_example_ranks_on_one_store_twice_at_once_and_twice_in_a_row(tmp_path):
    """Two jobs of the example on ONE store directory at the same time, each
    with its own job id, then the same job id again: every run succeeds and
    leaves no file behind. (That ranks of different jobs never average each
    other is tests/jobs' JobIdentity.TwoJobsOnOneFileStoreNeverMeet.)"""
    script = os.path.join(ROOT, "examples", "python", "numpy_allreduce.py")
    url = "file://" + str(tmp_path / "shared")

    def start(job, rank):
        return subprocess.Popen([sys.executable, script, "--rank", str(rank), "--world", "2",
                                 "--rendezvous", url, "--job", job],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    for jobs in (["job-a", "job-b"], ["job-a"]):
        procs = [start(job, rank) for rank in (0, 1) for job in jobs]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        for p, out in zip(procs, outs):
            assert p.returncode == 0 and ": ok" in out, out
        assert os.listdir(str(tmp_path / "shared")) == []


RANK_WITH_HOST_STORE = textwrap.dedent("""
    import sys, datetime, numpy as np, torch.distributed as dist, ddphooks
    rank, path = int(sys.argv[1]), sys.argv[2]
    store = dist.FileStore(path, 2)
    a = np.full(100, rank + 1.0, np.float32)
    with ddphooks.Session({"hook": {"family": "default", "name": "allreduce"}},
                          rank=rank, world_size=2, rendezvous="host", store=store) as s:
        s.run(a)
    assert (a == 1.5).all(), a[:4]
    print("ok")
""")


def test_two_ranks_through_a_host_store(tmp_path):
    pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    procs = [subprocess.Popen([sys.executable, "-c", RANK_WITH_HOST_STORE, str(r),
                               str(tmp_path / "filestore")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
