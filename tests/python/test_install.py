"""The package installs both ways and then finds libddph.so by itself:
`cmake --install` (into the Python site dir under the prefix) and
`pip install ./python` (offline, no build isolation needed)."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("DDPH_BUILD_DIR")

CHECK = ("import ddphooks, numpy as np, tempfile; d = tempfile.mkdtemp(); "
         "s = ddphooks.Session({'hook': {'family': 'default', 'name': 'allreduce'}}, rank=0, "
         "world_size=1, rendezvous='file://' + d); a = np.ones(8, np.float32); s.run(a); "
         "s.close(); print(ddphooks.__file__); print(ddphooks.library_path())\n"
         # The subpackage ddphooks.torch is installed too, where torch is there.
         "import importlib.util\n"
         "if importlib.util.find_spec('torch'): import ddphooks.torch, ddphooks.torch.ddp\n")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("DDPH_LIBRARY", "PYTHONPATH")}
    env.update(extra)
    return env


@pytest.mark.skipif(not BUILD, reason="DDPH_BUILD_DIR is not set (ctest sets it)")
def test_cmake_install_puts_package_in_site_dir(tmp_path):
    pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")
    prefix = tmp_path / "prefix"
    subprocess.run([os.environ.get("DDPH_CMAKE", "cmake"), "--install", BUILD, "--prefix",
                    str(prefix)], check=True,
                   stdout=subprocess.DEVNULL)
    sites = [os.path.join(dp) for dp, dn, fn in os.walk(prefix) if "ddphooks" in dn and
             os.path.isfile(os.path.join(dp, "ddphooks", "_install_paths.py"))]
    assert len(sites) == 1, sites
    # Run from elsewhere, so that no source tree or build tree is near.
    r = subprocess.run([sys.executable, "-c", CHECK], env=clean_env(PYTHONPATH=sites[0]),
                       cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pkg, lib = r.stdout.split()
    assert pkg.startswith(str(prefix)) and lib.startswith(str(prefix))


def test_pip_install_works_offline_and_finds_the_build(tmp_path):
    """pip install records where the build put libddph.so: the package then
    finds it with no environment variable at import time."""
    pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip("pip is not installed (Debian python3-pip); use cmake --install")
    if not BUILD:
        pytest.skip("DDPH_BUILD_DIR is not set (ctest sets it)")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    # The copy has no build beside it: DDPH_BUILD_DIR names the build at
    # install time (from a checkout, build/ beside python/ is found alone).
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                        "--disable-pip-version-check", "--target", str(target), str(src)],
                       env=clean_env(PIP_NO_INPUT="1", DDPH_BUILD_DIR=BUILD),
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", CHECK], env=clean_env(PYTHONPATH=str(target)),
                       cwd=str(tmp_path), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pkg, lib = r.stdout.split()
    assert pkg.startswith(str(target))
    assert os.path.realpath(lib) == os.path.realpath(os.path.join(BUILD, "lib", "libddph.so")), lib
    # The ddph console script runs the recorded build's tool.
    r = subprocess.run([str(target / "bin" / "ddph"), "--version"],
                       env=clean_env(PYTHONPATH=str(target)), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("ddph 0.1.0 (ABI "), r.stdout + r.stderr
