"""Parameters the hook steps itself (zero, optimizer_overlap) must not be
stepped again by a torch.optim optimizer: each would move twice. PyTorch 2
refuses such a step before it happens (a global step pre-hook); 1.13 has no
such hook, so the step is noticed at the next forward and warned about."""
import warnings
import weakref

import torch

from .. import errors
from . import _compat


class SecondStepGuard:
    """Watches the parameters a session's hook steps (docs/zero.md)."""

    def __init__(self, session):
        self._session = session
        self._stepped = frozenset()  # ids of the parameters the hook steps
        self._stepped_by = ""
        self._step_check = None  # the torch.optim step pre-hook, PyTorch 2

    def refuse_steps_of(self, module, params, stepped_by):
        """Refuses a torch.optim step of `params` (of `module`), which the
        hook steps itself (PyTorch 2); on 1.13, which has no global step
        hooks, warns at the next forward instead."""
        params = list(params)
        self._stepped = frozenset(id(p) for p in params)
        self._stepped_by = stepped_by
        self._step_check = _compat.register_optimizer_step_pre_hook(self._check_optimizer_step)
        if self._step_check is None:
            self._warn_second_steps_of(module, params)

    def remove(self):
        if self._step_check is not None:
            self._step_check.remove()
            self._step_check = None

    def _warn_second_steps_of(self, module, params):
        """A second step cannot be refused before it happens without a global
        step hook, so it is noticed at the next forward and warned about,
        once. ddph writes the parameters it steps through their memory, which
        leaves their version counters alone; a torch.optim step updates them
        in place (p.add_), which bumps them. module.load_state_dict() bumps
        them too, and restarts the watch."""
        index = {id(p): i for i, p in enumerate(module.parameters())}
        watched = [(weakref.ref(p), index.get(id(p), -1)) for p in params]
        seen = {"versions": None, "warned": False}

        def versions():
            return [ref()._version if ref() is not None else -1 for ref, _ in watched]

        def check(_module, _inputs):
            if seen["warned"] or self._session._handle is None:
                return
            now = versions()
            before, seen["versions"] = seen["versions"], now
            if before is None or before == now:
                return
            seen["warned"] = True
            moved = [watched[i][1] for i, (a, b) in enumerate(zip(before, now)) if a != b]
            warnings.warn(
                "ddphooks.torch: %d parameter(s) of the DDP model (its parameters %s) changed in "
                "place since the last forward, and %s already steps them during the backward: "
                "was an optimizer's step() called on them too? Each would move twice. PyTorch "
                "%s has no global optimizer step hook to refuse it before it happens (PyTorch 2 "
                "refuses it)" % (len(moved), ranges(moved), self._stepped_by, torch.__version__),
                RuntimeWarning)

        def restart(*_args):
            seen["versions"] = None

        module.register_forward_pre_hook(check)
        module._register_load_state_dict_pre_hook(restart)

    def _check_optimizer_step(self, optimizer, args, kwargs):
        # Only a parameter with a gradient would move: optimizer_in_backward
        # leaves none, and torch.optim skips those.
        twice = [i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])
                 if id(p) in self._stepped and p.grad is not None]
        if twice:
            raise errors.DDPHError(
                errors.Code.INVALID_ARGUMENT,
                "ddphooks.torch: %s.step() would step %d parameter(s) (its parameters %s) that "
                "%s already steps during the backward: each would move twice. Leave them out of "
                "that optimizer; nothing was stepped" %
                (type(optimizer).__name__, len(twice), ranges(twice), self._stepped_by))


def ranges(indices):
    """"0-3, 7" for [0, 1, 2, 3, 7]."""
    out, start = [], None
    for i, n in enumerate(indices):
        if start is None:
            start = n
        if i + 1 == len(indices) or indices[i + 1] != n + 1:
            out.append(str(start) if start == n else "%d-%d" % (start, n))
            start = None
    return ", ".join(out)
