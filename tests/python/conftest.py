"""Shared setup of the Python tests (run by ctest through tests/python/CMakeLists.txt).

The package comes from the source tree (python/); libddph.so from
$DDPH_LIBRARY, which ctest sets to the build tree's. A run where every test
skipped (no torch or numpy) exits 77, which ctest reports as skipped.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    # 5: nothing collected, as when a module skips itself whole (a test of
    # PyTorch 2 under 1.13).
    if reporter is None or exitstatus not in (0, 5):
        return
    passed = len(reporter.stats.get("passed", []))
    skipped = len(reporter.stats.get("skipped", []))
    if passed == 0 and skipped > 0:
        session.exitstatus = 77


@pytest.fixture(scope="module")
def gloo_world_of_one(tmp_path_factory):
    """torch.distributed's default group in this process: a world of 1 on
    Gloo, for the module's tests (DDP needs one)."""
    import torch.distributed as dist
    init = tmp_path_factory.mktemp("pg") / "init"
    dist.init_process_group("gloo", init_method="file://%s" % init, rank=0, world_size=1)
    yield
    dist.destroy_process_group()
