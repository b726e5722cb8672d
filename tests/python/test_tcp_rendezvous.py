"""Session(rendezvous="env://") and "tcp://host:port" from Python: rank 0
serves the store at MASTER_ADDR:MASTER_PORT, as torchrun and ddph lab set
them, with no shared directory and no Redis. Loopback ports only."""
import os
import socket
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

import ddphooks  # noqa: E402  (conftest puts python/ on sys.path)
from ddphooks.errors import Code  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "python", "numpy_allreduce.py")
ALLREDUCE = {"hook": {"family": "default", "name": "allreduce"},
             "comm": {"backend": "gloo", "timeout": "2s"}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_numpy_ranks_meet_over_env_as_torchrun_starts_them():
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   WORLD_SIZE="2")
        procs.append(subprocess.Popen(
            [sys.executable, EXAMPLE, "--rendezvous", "env://", "--job", "py-env", "--n", "777"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, out
        # The example checks the mean against NumPy's exact one and says ok.
        assert "rank %d: ok (777 elements averaged over 2 ranks" % rank in out, out


def free_port_pair():
    """A port P with P + 1 free too: torchrun's agent serves P, rank 0 P + 1."""
    for _ in range(50):
        p = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    pytest.skip("no two free ports in a row on 127.0.0.1")


def test_two_numpy_ranks_meet_over_env_under_torchrun():
    """torchrun's agent serves its own store at MASTER_PORT: env:// serves on the
    port after it (TORCHELASTIC_USE_AGENT_STORE=True), and both ranks meet."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (torchrun)")
    if int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("torch %s: its torchrun fails on this Python; needs PyTorch 2"
                    % torch.__version__)
    port = free_port_pair()
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--master-port", str(port), EXAMPLE, "--rendezvous", "env://"],
                       capture_output=True, text=True, timeout=180)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for rank in range(2):
        assert "rank %d: ok (1000 elements averaged over 2 ranks" % rank in out, out


def test_env_without_master_port_is_named(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(ddphooks.DDPHError, match="MASTER_PORT is not set") as e:
        ddphooks.Session(ALLREDUCE, rank=1, world_size=2, rendezvous="env://")
    assert e.value.code == Code.INVALID_ARGUMENT


def test_a_taken_port_is_refused_on_rank_0_before_any_wait():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        url = "tcp://127.0.0.1:%d" % port
        with pytest.raises(ddphooks.DDPHError,
                           match="%s: port %d is in use" % (url, port)) as e:
            ddphooks.Session(ALLREDUCE, rank=0, world_size=2, rendezvous=url)
        assert e.value.code == Code.INVALID_ARGUMENT


def test_without_rank_0_a_rank_fails_at_its_timeout_naming_the_address():
    port = free_port()
    with pytest.raises(ddphooks.DDPHError,
                       match="rank 1 cannot reach rank 0's tcp store at 127.0.0.1:%d" % port) as e:
        ddphooks.Session(ALLREDUCE, rank=1, world_size=2,
                         rendezvous="tcp://127.0.0.1:%d" % port)
    assert e.value.code == Code.TIMEOUT
