"""pip install ./python: the pure-Python ddphooks package (no compiler, no
build dependencies beyond setuptools, which Debian's python3-pip pulls in).

There is deliberately no pyproject.toml: with one, pip would build in an
isolated environment and fetch setuptools from the network; without it,
pip uses the setuptools already installed and works offline.

libddph.so is not bundled. The install records where the build of this
checkout put it (ddphooks/_install_paths.py, as `cmake --install` does), so
`import ddphooks` finds it with no environment variable: $DDPH_BUILD_DIR/lib
when that is set at install time, else build/lib or build-py/lib beside
this folder. Without one, the package searches at import time
(docs/python.md).
"""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library_dir():
    """The directory of this checkout's built libddph.so, or None."""
    dirs = []
    if os.environ.get("DDPH_BUILD_DIR"):
        dirs.append(os.path.join(os.environ["DDPH_BUILD_DIR"], "lib"))
    dirs += [os.path.join(HERE, "..", build, "lib") for build in ("build", "build-py")]
    for d in dirs:
        if os.path.isfile(os.path.join(d, "libddph.so")):
            return os.path.realpath(d)
    return None


class BuildPyRecordingTheLibrary(build_py):
    def run(self):
        super().run()
        libdir = built_library_dir()
        if libdir is None:
            print("ddphooks: no built libddph.so found (build/lib beside python/, or "
                  "$DDPH_BUILD_DIR/lib); the package will search for it at import time")
            return
        target = os.path.join(self.build_lib, "ddphooks", "_install_paths.py")
        with open(target, "w") as f:
            f.write("# Written by `pip install`: where this checkout's build put libddph.so.\n")
            f.write("LIBDIR = %r\n" % libdir)


setup(
    name="ddphooks",
    version="0.1.0",
    description="Gradient communication hooks for data-parallel training (ctypes over libddph.so)",
    packages=["ddphooks", "ddphooks.torch"],
    python_requires=">=3.8",
    extras_require={"numpy": ["numpy"], "torch": ["torch>=1.13"]},
    cmdclass={"build_py": BuildPyRecordingTheLibrary},
)
