"""Kernel arrays to and from kingdon's layout.

galinear's kernels take rows ``(N, k)`` of the coefficients of ``kernel.input_blades`` and name
the basis vectors as clifford does: ``e1 .. en``, the null vectors first (PGA's null vector is
``e1``; points sit on ``e123``, ``e124``, ``e134``, ``e234``). kingdon stores one array of N
values per blade, ``(k, N)``, keys blades by bitmask and names the basis vectors from ``e0`` when
the algebra has a null vector (PGA's ``e0``), else from ``e1``. Both order the vectors null,
positive, negative, so a blade is the same bitmask in both and only its name and the axis order
differ; :func:`kingdon_keys` gives the names, :func:`to_kingdon` and :func:`from_kingdon` move
the arrays (no kingdon import needed).
"""
from __future__ import annotations

import numpy as np

from galinear import blades as _blades

__all__ = ["kingdon_keys", "to_kingdon", "from_kingdon"]


def _metric(algebra) -> tuple:
    metric = getattr(algebra, "metric", algebra)
    return tuple(int(m) for m in metric)


def kingdon_keys(algebra, blades) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """kingdon's bitmask keys and names of galinear's ``blades`` (e.g. ``kernel.input_blades["x"]``).

    >>> kingdon_keys(galinear.Algebra(3, 0, 1), ["e1", "e12", "e234"])
    ((1, 3, 14), ('e0', 'e01', 'e123'))
    """
    metric = _metric(algebra)
    if list(metric) != sorted(metric, key=lambda m: {0: 0, 1: 1, -1: 2}[m]):
        raise ValueError(f"metric {metric} is not in the order null, positive, negative that both libraries use")
    n = len(metric)
    start = 0 if 0 in metric else 1
    bitmasks = _blades.shortlex_bitmasks(n)
    masks, names = [], []
    for blade in blades:
        mask = int(bitmasks[_blades.blade_index(n, blade)])  # a ValueError names an unknown blade
        masks.append(mask)
        names.append("e" + "".join(str(start + i) for i in range(n) if mask >> i & 1))
    return tuple(masks), tuple(names)


def to_kingdon(array, algebra, blades):
    """``(keys, values)``: kingdon's bitmask keys and its ``(k, N)`` values of rows ``(N, k)`` of
    ``blades``; ``kingdon.Algebra(p, q, r).multivector(values=values, keys=keys)`` builds the
    multivector."""
    array = np.asarray(array)
    keys, _ = kingdon_keys(algebra, blades)
    if array.shape[-1] != len(keys):
        raise ValueError(f"the array has {array.shape[-1]} coefficients on its last axis; {len(keys)} blades given")
    return keys, np.ascontiguousarray(np.moveaxis(array, -1, 0))


def from_kingdon(values, keys, algebra, blades) -> np.ndarray:
    """Rows ``(N, len(blades))`` of galinear's ``blades`` from kingdon's ``(k, N)`` values under
    the bitmask ``keys``; a blade kingdon does not hold is 0."""
    values = np.asarray(values)
    keys = [int(k) for k in keys]
    if values.shape[0] != len(keys):
        raise ValueError(f"values hold {values.shape[0]} blades on their first axis; {len(keys)} keys given")
    wanted, _ = kingdon_keys(algebra, blades)
    known = {k: i for i, k in enumerate(keys)}
    out = np.zeros(values.shape[1:] + (len(wanted),), dtype=np.result_type(values.dtype, np.float64))
    for j, mask in enumerate(wanted):
        if mask in known:
            out[..., j] = values[known[mask]]
    return out
