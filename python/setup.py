"""The ddphooks Python package, two ways:

pip install ./python
    the pure-Python package over this checkout's build (no compiler, no build
    dependencies beyond setuptools, which Debian's python3-pip pulls in).
    libddph.so is not bundled: the install records where the build put it
    (ddphooks/_install_paths.py, as `cmake --install` does), so `import
    ddphooks` finds it with no environment variable: $DDPH_BUILD_DIR/lib
    when that is set at install time, else build/lib or build-py/lib beside
    this folder. Without one, the package searches at import time
    (docs/python.md).

DDPH_WHEEL_BUILD_DIR=$PWD/build pip wheel --no-deps --no-build-isolation ./python
    (what `./build.sh wheel` runs) a wheel that stands alone: it carries that
    build's libddph.so, its plugins and the ddph tool, stripped of debug
    information, under ddphooks/lib and ddphooks/bin, the layout the loader
    searches (lib/ddphooks beside libddph.so, ../lib/ddphooks from bin/). The
    wheel is tagged py3-none-linux_<arch>: no Python extension, but
    machine code that needs the shared libraries docs/python.md lists from
    the system (yaml-cpp, Gloo, OpenBLAS...).

There is deliberately no pyproject.toml: with one, pip would build in an
isolated environment and fetch setuptools from the network; without it,
pip uses the setuptools already installed and works offline.
"""
import glob
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE_FROM = os.environ.get("DDPH_WHEEL_BUILD_DIR")
if BUNDLE_FROM and not os.path.isabs(BUNDLE_FROM):
    # pip runs this file from a copy or from python/: a relative path is ambiguous.
    raise SystemExit("ddphooks wheel: DDPH_WHEEL_BUILD_DIR=%s must be an absolute path"
                     % BUNDLE_FROM)


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


def copy_stripped(src, dst):
    """src (a symlink is followed) to dst without debug information, mode kept."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    subprocess.run(["objcopy", "--strip-debug", os.path.realpath(src), dst], check=True)
    shutil.copymode(os.path.realpath(src), dst)


def bundle(build_dir, package_dir):
    """The build's libddph.so, plugins and ddph tool into the package."""
    build_dir = os.path.abspath(build_dir)
    lib = os.path.join(build_dir, "lib", "libddph.so")
    tool = os.path.join(build_dir, "bin", "ddph")
    plugins = sorted(glob.glob(os.path.join(build_dir, "lib", "ddphooks", "libddph_*.so")))
    missing = [p for p in (lib, tool) if not os.path.isfile(p)] + ([] if plugins else [
        os.path.join(build_dir, "lib", "ddphooks", "libddph_*.so")])
    if missing:
        raise SystemExit("ddphooks wheel: DDPH_WHEEL_BUILD_DIR=%s lacks %s; build it first "
                         "(./build.sh)" % (build_dir, ", ".join(missing)))
    copy_stripped(lib, os.path.join(package_dir, "lib", "libddph.so"))
    copy_stripped(tool, os.path.join(package_dir, "bin", "ddph"))
    for p in plugins:
        copy_stripped(p, os.path.join(package_dir, "lib", "ddphooks", os.path.basename(p)))


class BuildPy(build_py):
    def run(self):
        super().run()
        package_dir = os.path.join(self.build_lib, "ddphooks")
        if BUNDLE_FROM:
            bundle(BUNDLE_FROM, package_dir)
            return
        libdir = built_library_dir()
        if libdir is None:
            print("ddphooks: no built libddph.so found (build/lib beside python/, or "
                  "$DDPH_BUILD_DIR/lib); the package will search for it at import time")
            return
        with open(os.path.join(package_dir, "_install_paths.py"), "w") as f:
            f.write("# Written by `pip install`: where this checkout's build put libddph.so.\n")
            f.write("LIBDIR = %r\n" % libdir)


cmdclass = {"build_py": BuildPy}
distclass = Distribution
if BUNDLE_FROM:
    from wheel.bdist_wheel import bdist_wheel

    class BundledDistribution(Distribution):
        """It carries machine code: installed into platlib, the wheel's root."""

        def has_ext_modules(self):
            return True

    class BdistWheelBundled(bdist_wheel):
        """Platform-specific, but no CPython extension: any Python 3 on this
        platform can load it."""

        def get_tag(self):
            return ("py3", "none") + tuple(super().get_tag()[2:])

    cmdclass["bdist_wheel"] = BdistWheelBundled
    distclass = BundledDistribution

setup(
    name="ddphooks",
    version="0.1.0",
    description="Gradient communication hooks for data-parallel training (ctypes over libddph.so)",
    packages=["ddphooks", "ddphooks.torch", "ddphooks.jax"],
    python_requires=">=3.8",
    extras_require={"numpy": ["numpy"], "torch": ["torch>=1.13"], "plot": ["matplotlib"]},
    entry_points={"console_scripts": ["ddph = ddphooks._tool:main"]},
    cmdclass=cmdclass,
    distclass=distclass,
)
