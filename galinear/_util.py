"""Small chores shared by the layers, the training loop and the compression study, defined once.

- :func:`count_parameters`: the parameter count of a module;
- :func:`cosine_schedule`: the learning-rate factor of a cosine schedule with optional warm-up;
- :func:`defer_operators`: binary operators that leave operands marked ``_galinear_defers`` (the
  traced multivectors of :func:`galinear.compile`) to those operands' reflected operators.

Plain Python (no torch import), so every layer of galinear can use it.
"""
from __future__ import annotations

import math

__all__ = ["count_parameters", "cosine_schedule", "defer_operators", "BINARY_OPERATORS"]

#: The binary operators of galinear's multivector classes.
BINARY_OPERATORS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__xor__", "__rxor__",
                    "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__or__", "__ror__", "__and__",
                    "__rand__", "__matmul__", "__rmatmul__", "__truediv__", "__rtruediv__")


def defer_operators(cls, names=BINARY_OPERATORS):
    """Wrap the operators ``names`` that ``cls`` has so that an operand with ``_galinear_defers``
    gets NotImplemented: Python then asks that operand's reflected operator (``C * x`` with a
    constant C and a traced x reaches ``x.__rmul__``). Returns ``cls``."""

    def deferring(method):
        def operator(self, other):
            if getattr(other, "_galinear_defers", False):
                return NotImplemented
            return method(self, other)

        operator.__name__ = operator.__qualname__ = method.__name__
        operator.__doc__ = method.__doc__
        return operator

    for name in names:
        method = getattr(cls, name, None)
        if method is not None:
            setattr(cls, name, deferring(method))
    return cls


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
