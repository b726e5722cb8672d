"""The `ddph` console script of a pip install: runs the ddph tool that came
with the package (a wheel carries it in ddphooks/bin), or the one of the
build an in-tree install recorded (_install_paths.LIBDIR/../bin)."""
import os
import sys


def tool_path():
    """(the ddph executable this package goes with, or None; the paths searched)."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "bin", "ddph")]
    try:
        from . import _install_paths
        paths.append(os.path.join(os.path.dirname(_install_paths.LIBDIR), "bin", "ddph"))
    except ImportError:
        pass
    return next((p for p in paths if os.access(p, os.X_OK)), None), paths


def main():
    found, searched = tool_path()
    if found is None:
        sys.stderr.write("ddph: the ddph tool is not installed with this ddphooks package "
                         "(searched %s); install the wheel (./build.sh wheel) or build the "
                         "checkout (./build.sh)\n" % ", ".join(searched))
        return 127
    os.execv(found, [found] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
