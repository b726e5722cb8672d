"""hook.metrics() under PyTorch DDP: exact bytes per step, written through
MetricsWriter (torch_metrics_rank.py, in a process of its own)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))


def test_hook_metrics_give_each_ddp_step_its_exact_bytes(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(HERE, "torch_metrics_rank.py"),
                        str(tmp_path / "init"), str(tmp_path / "run.csv")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout
