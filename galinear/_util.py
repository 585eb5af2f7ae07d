"""Small chores shared by the layers, the training loop and the compression study, defined once.

- :func:`count_parameters`: the parameter count of a module;
- :func:`cosine_schedule`: the learning-rate factor of a cosine schedule with optional warm-up.

Plain Python (no torch import), so every layer of galinear can use it.
"""
from __future__ import annotations

import math

__all__ = ["count_parameters", "cosine_schedule"]


def count_parameters(module) -> int:
    """Number of parameters of a module: sum of ``p.numel()`` over ``module.parameters()``.

    Every parameter is counted (trainable or not, biases and heads included); one shared by
    several submodules is counted once, as ``parameters()`` yields it once.
    """
    return int(sum(p.numel() for p in module.parameters()))


def cosine_schedule(step: int, total: int, warmup: int = 0) -> float:
    r"""Learning-rate factor of step ``step`` (0-based) in a run of ``total`` steps.

    A linear warm-up over the first ``warmup`` steps (factor (step + 1) / warmup), then a cosine
    from 1 to 0, reached once at ``step = total`` and held there:

    .. math::

        f = \frac{1 + \cos(\pi\, t / T)}{2}, \quad t = \min(step - warmup, T), \quad
        T = \max(1, total - warmup).

    Multiply by the peak rate (or pass it to ``torch.optim.lr_scheduler.LambdaLR``).
    """
    if warmup and step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, span) / span))
