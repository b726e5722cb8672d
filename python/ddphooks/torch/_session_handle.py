"""What the DDP hook (ddp.py) and the FSDP2 handle (fsdp.py) share: the
ddph session behind them, read the same way, the name of their profiler
ranges, and the store their ranks meet in."""
import torch.distributed as dist

from .._config import config_doc as _config_doc
from . import profiler as _profiler


class SessionHandle:
    """A session and what the profiler needs of it. ``label``: the
    torch.profiler ranges' name, "ddph family/name". Each step of the
    session (its span records' step) is counted in ``_session_steps``; the
    clock marks place those spans in a profiler's trace
    (profiler.export_chrome_trace)."""

    def __init__(self, session):
        self.session = session
        self.label = "ddph"
        self._session_steps = 0
        self._clock_marks = _profiler.StepMarks()

    def stats(self):
        return self.session.stats()

    def metrics(self, per_bucket=False):
        """The steps completed since the last call, one
        ddphooks.metrics.StepMetrics each (see Session.metrics); e.g. after
        optimizer.step(): ``for m in hook.metrics(): writer.write(m, loss=...)``."""
        return self.session.metrics(per_bucket)

    def spans(self):
        """The phases of its buckets since the last call (Session.spans());
        ddphooks.torch.profiler.export_chrome_trace puts them in a trace."""
        return self.session.spans()


def outer_hook(config):
    """The config as a dict, and its outer hook's section (None when the
    config names none)."""
    doc = _config_doc(config)
    hook = doc.get("hook") if isinstance(doc, dict) else None
    return doc, hook if isinstance(hook, dict) else None


def hook_label(config):
    """"ddph family/name" of the config's outer hook (with "+ rules" when it
    has rules), for profiler ranges; "ddph" when it cannot be read."""
    doc, hook = outer_hook(config)
    if hook is None:
        return "ddph"
    label = "ddph %s/%s" % (hook.get("family"), hook.get("name"))
    return label + " + rules" if doc.get("rules") else label


def default_store(prefix):
    """torch.distributed's own c10d store under `prefix`: the rendezvous
    ("host") of ranks that torchrun or init_process_group started."""
    return dist.PrefixStore(prefix, dist.distributed_c10d._get_default_store())
