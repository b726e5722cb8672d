"""The optimizer side of sharded_optimizer and optimizer_in_backward:
torch.optim's names for the optimizer and its options."""
from .. import errors

# torch.optim classes by name: optimizer_in_backward(ddp, torch.optim.AdamW, ...)
# reads as _apply_optimizer_in_backward(torch.optim.AdamW, params, {...}).
_NAMES = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}


def ddph_options(optimizer, options):
    """(ddph optimizer name, options by ddph's names) from torch.optim's:
    a class torch.optim.SGD/Adam/AdamW or its name, and ``betas=(b1, b2)``
    as beta1, beta2 (the other options have torch's names already)."""
    name = optimizer
    if isinstance(optimizer, type):
        name = _NAMES.get(optimizer.__name__)
        if name is None:
            raise errors.DDPHError(errors.Code.UNSUPPORTED,
                                   "ddphooks.torch: optimizer %s.%s is not one ddph steps "
                                   "(torch.optim.SGD, Adam or AdamW)" %
                                   (optimizer.__module__, optimizer.__name__))
    options = dict(options)
    if "betas" in options:
        if "beta1" in options or "beta2" in options:
            raise errors.DDPHError(errors.Code.INVALID_ARGUMENT,
                                   "ddphooks.torch: give betas or beta1/beta2, not both")
        betas = tuple(options.pop("betas"))
        if len(betas) != 2:
            raise errors.DDPHError(errors.Code.INVALID_ARGUMENT,
                                   "ddphooks.torch: betas=%r is not a pair (beta1, beta2)" %
                                   (betas,))
        options["beta1"], options["beta2"] = float(betas[0]), float(betas[1])
    return str(name).lower(), options
