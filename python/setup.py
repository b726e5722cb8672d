"""pip install ./python: the pure-Python ddphooks package (no compiler, no
build dependencies beyond setuptools, which Debian's python3-pip pulls in).

There is deliberately no pyproject.toml: with one, pip would build in an
isolated environment and fetch setuptools from the network; without it,
pip uses the setuptools already installed and works offline.

libddph.so is not bundled; the package finds it through DDPH_LIBRARY, beside
itself, in the `cmake --install` prefix, or in a build tree (docs/python.md).
"""
from setuptools import setup

setup(
    name="ddphooks",
    version="0.1.0",
    description="Gradient communication hooks for data-parallel training (ctypes over libddph.so)",
    packages=["ddphooks"],
    python_requires=">=3.8",
    extras_require={"numpy": ["numpy"], "torch": ["torch>=1.13"]},
)
