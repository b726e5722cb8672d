"""The hooks the time-to-accuracy benchmark compares, each a key, a label for
tables and plots, and how to register it on a DDP model.

PyTorch's hooks are registered as they ship (nothing wrapped: a crash is
recorded as one); ddph's go through ddphooks.torch.register with a config
dict, whose communicator joins through PyTorch's c10d store.
"""
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import ddphooks.torch

# Plain allreduce for the first steps, as PyTorch's PowerSGD needs (>= 2
# with error feedback); the same for every PowerSGD row.
POWERSGD_START = 10
# Post-local SGD: global gradient averaging for these steps, then local steps
# with the parameters averaged over the world every LOCALSGD_PERIOD steps.
LOCALSGD_START, LOCALSGD_PERIOD = 50, 4


def _hook(family, name, options=None, wrap=None):
    hook = {"family": family, "name": name, "options": options or {}}
    if wrap:
        hook["wrap"] = wrap
    return hook


def _ddph(family, name, options=None, wrap=None):
    """A job of one hook on ddph's Gloo communicator (joined through c10d)."""
    return {"comm": {"backend": "gloo", "timeout": "60s"},
            "hook": _hook(family, name, options, wrap)}


def _quantization(bits, error_feedback=False):
    return ("quantization", "per_channel",
            {"protocol": "reduce_scatter", "channel_size": 512, "bits": bits,
             "min_bytes": 65536, "error_feedback": error_feedback})


def _powersgd(name, rank):
    return _ddph("powersgd", name, {"rank": rank, "start_iter": POWERSGD_START,
                                    "error_feedback": True, "warm_start": True})


def _torch_powersgd(rank):
    """(state(world), hook) of PyTorch's powerSGD_hook with the settings of ddph's rows."""
    return (lambda world: powerSGD_hook.PowerSGDState(
        process_group=None, matrix_approximation_rank=rank, start_powerSGD_iter=POWERSGD_START,
        use_error_feedback=True, warm_start=True),
        powerSGD_hook.powerSGD_hook)


# key -> (label, "torch" or "ddph", config(world) for ddph / (state(world), hook) for torch)
HOOKS = {
    "torch_allreduce": ("PyTorch allreduce_hook", "torch",
                        (lambda world: None, default_hooks.allreduce_hook)),
    "torch_fp16": ("PyTorch fp16_compress_hook", "torch",
                   (lambda world: None, default_hooks.fp16_compress_hook)),
    "torch_powersgd4": ("PyTorch powerSGD_hook rank 4", "torch", _torch_powersgd(4)),
    # Not in the matrix: it shows that rank 1's stall is PowerSGD's, not ddph's.
    "torch_powersgd1": ("PyTorch powerSGD_hook rank 1", "torch", _torch_powersgd(1)),
    "ddph_allreduce": ("ddph allreduce", "ddph",
                       lambda world: _ddph("default", "allreduce")),
    "ddph_fp16": ("ddph fp16_compress", "ddph",
                  lambda world: _ddph("default", "fp16_compress")),
    "ddph_bf16": ("ddph bf16_compress", "ddph",
                  lambda world: _ddph("default", "bf16_compress")),
    "ddph_q8": ("ddph quantization 8-bit reduce_scatter", "ddph",
                lambda world: _ddph(*_quantization(8))),
    "ddph_q4ef": ("ddph quantization 4-bit reduce_scatter + EF", "ddph",
                  lambda world: _ddph(*_quantization(4, error_feedback=True))),
    "ddph_psgd1": ("ddph powersgd rank 1", "ddph", lambda world: _powersgd("powersgd", 1)),
    "ddph_psgd4": ("ddph powersgd rank 4", "ddph", lambda world: _powersgd("powersgd", 4)),
    "ddph_bpsgd": ("ddph batched_powersgd rank 1", "ddph",
                   lambda world: _powersgd("batched_powersgd", 1)),
    "ddph_localsgd": ("ddph post_localsgd + averaging every %d" % LOCALSGD_PERIOD, "ddph",
                      lambda world: _ddph("post_localsgd", "model_averaging",
                                          {"period": LOCALSGD_PERIOD},
                                          wrap=_hook("post_localsgd", "post_localsgd",
                                                     {"start_localsgd_iter": LOCALSGD_START,
                                                      "post_local_gradient_allreduce": False}))),
    # The hook that chooses (docs/auto.md), with its defaults.
    "ddph_auto": ("ddph auto (chooses per bucket)", "ddph",
                  lambda world: _ddph("auto", "auto")),
    # The same without holding lossy candidates back on a norm jump: what
    # the accuracy-first hold costs.
    "ddph_auto_nohold": ("ddph auto, norm_jump: 0", "ddph",
                         lambda world: _ddph("auto", "auto", {"norm_jump": 0})),
    # auto with one candidate, 8-bit: what choosing costs per step (its
    # exchanges, norm checks and bookkeeping) beside the fixed 8-bit hook.
    "ddph_auto_q8only": ("ddph auto, candidates: q8", "ddph",
                         lambda world: _ddph("auto", "auto", {"candidates": "q8"})),
    # In the lab every link has the same rate, so there is no fast link inside
    # a "machine": this row shows the hierarchy's cost, not the gain it has
    # on a real cluster. Machines of world/2 ranks; the 8-bit hook between them.
    "ddph_hier_q8": ("ddph hierarchical (8-bit between machines)", "ddph",
                     lambda world: _ddph("hierarchical", "hierarchical",
                                         {"local_size": max(1, world // 2)},
                                         wrap=_hook(*_quantization(8)))),
}


def label(key):
    return HOOKS[key][0]


def register(key, ddp, world):
    """Registers hook `key` on `ddp`; returns what must be closed after (or None)."""
    _, kind, spec = HOOKS[key]
    if kind == "torch":
        make_state, hook = spec
        ddp.register_comm_hook(make_state(world), hook)
        return None
    return ddphooks.torch.register(ddp, spec(world))
