"""ddphooks.torch checkpoints: ddp.state_dict() is the model's alone (it loads
into a plain model), the hook's state_dict() beside it resumes the hook, and
a checkpoint of an older version, with the hook state inside the DDP state
dict, still loads (checkpoint_rank.py, in a process of its own)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))


def test_checkpoints_keep_the_hook_state_beside_the_model(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(HERE, "checkpoint_rank.py"),
                        str(tmp_path / "init")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout
