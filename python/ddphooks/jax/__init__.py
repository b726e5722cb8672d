"""ddphooks for JAX: data-parallel training, one process per rank, with the
gradients (or the optimizer step) going through the hook a YAML names.

    import ddphooks.jax
    reducer = ddphooks.jax.GradientReducer("configs/fp16.yaml")   # RANK, WORLD_SIZE...
    grads = reducer.reduce(jax.grad(loss)(params, batch))        # the mean over ranks
    updates, opt_state = optimizer.update(grads, opt_state, params)

See docs/jax.md.
"""
from .reducer import GradientReducer

__all__ = ["GradientReducer"]
