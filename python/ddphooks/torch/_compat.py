"""What differs between the PyTorch versions ddphooks.torch supports:
Debian's 1.13 and the newest 2.x (python/requirements-torch-latest.txt).
Every version switch of the package is a function here, so the rest reads
as one version's code."""
import re

import torch


def _release(text):
    """(major, minor) of a version string such as "2.15.0+cu132"."""
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


TORCH_RELEASE = _release(torch.__version__)


def at_least(major, minor=0):
    """Whether the running PyTorch is major.minor or newer."""
    return TORCH_RELEASE >= (major, minor)
