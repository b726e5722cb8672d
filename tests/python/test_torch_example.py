"""examples/python/torch_ddp.py as torchrun starts it (env:// rendezvous, so
the adapter joins through a c10d TCPStore): the one-line switch to ddph's
fp16 hook prints the same losses as PyTorch's fp16_compress_hook."""
import os
import re
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "python", "torch_ddp.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_like_torchrun(tmp_path, *args):
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2")
        procs.append(subprocess.Popen([sys.executable, EXAMPLE, "--steps", "25",
                                       "--checkpoint", str(tmp_path / "ckpt.pt")] + list(args),
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=150)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)
    return outs[0]


def losses(out):
    return re.findall(r"step +\d+ +loss ([0-9.]+)", out)


def test_one_line_switch_gives_pytorchs_losses(tmp_path):
    torch_out = run_like_torchrun(tmp_path)
    ddph_out = run_like_torchrun(tmp_path, "--ddph", os.path.join(ROOT, "configs", "fp16.yaml"))
    assert len(losses(torch_out)) == 3
    assert losses(ddph_out) == losses(torch_out), (torch_out, ddph_out)
    assert "and the ddph hook state" in ddph_out and "ddph stats" in ddph_out
    # Each rank's hook state is its own (error feedback, a zero shard): one file per rank.
    for rank in range(2):
        assert (tmp_path / ("ckpt.pt.ddph.rank%d" % rank)).is_file(), os.listdir(tmp_path)
    # ddp.state_dict() is the model's alone: it loads into a plain model.
    assert "the checkpoint's model loads into a plain model" in ddph_out, ddph_out
