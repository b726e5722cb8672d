"""ddphooks.torch.ProcessGroupComm (comm: {backend: host}) collective by
collective, on 2 Gloo ranks, against torch arithmetic on every rank's input."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))


def test_process_group_comm_collectives(tmp_path):
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "pg_comm_ranks.py"), str(r),
                               "2", str(tmp_path / "init")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)
    assert all("ok" in o for o in outs)
