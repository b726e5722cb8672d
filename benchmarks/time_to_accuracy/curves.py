"""Reading a training's accuracy curve, shared by the PyTorch benchmark
(train_rank.py) and the JAX example (examples/jax/train_mnist.py)."""


def time_to_target(curve, target):
    """(steps, seconds) at which the test accuracy first reaches `target`,
    seconds interpolated linearly between the two evaluations around it;
    (None, None) if it never does."""
    prev = (0, 0.0, 0.0)
    for step, secs, acc in curve:
        if acc >= target:
            s0, t0, a0 = prev
            frac = (target - a0) / (acc - a0) if acc > a0 else 1.0
            return step, t0 + frac * (secs - t0)
        prev = (step, secs, acc)
    return None, None
