"""The rule that picks the "numba" backend's kernel, below both :mod:`galinear.nn.functional.plan`
(which applies it and carries the choice in its plans) and :mod:`galinear.nn.numba_backend` (which
applies it only when called without a plan, with ``kernel="auto"``): neither imports the other."""
from __future__ import annotations

from galinear._switch_points import RESIDENT_MAX_TOKENS

__all__ = ["NUMBA_KERNELS", "numba_kernel"]

#: The kernels of the "numba" backend: one token at a time, or tiles of tokens.
NUMBA_KERNELS = ("resident", "tile")


def numba_kernel(tokens: int) -> str:
    """The "numba" backend's kernel for a batch of ``tokens`` tokens per chunk pair: "resident"
    up to the measured cross-over :data:`galinear._switch_points.RESIDENT_MAX_TOKENS`, "tile" above
    (the tile kernel pads a batch to a 16-token tile and vectorises along tokens)."""
    return "resident" if tokens <= RESIDENT_MAX_TOKENS else "tile"
