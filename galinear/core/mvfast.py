r"""The short path of :class:`~galinear.core.algebra.MultiVector` products and sandwiches.

A product of two tracked multivectors needs the compiled kernel of its (metric, product, grade
pattern of a, grade pattern of b) (:mod:`galinear.core.graded`), the pattern of the result and
its number of packed columns. :func:`product_plan` and :func:`sandwich_plan` find these once per
key and keep them in a dict, so a later call with the same grades is one dict lookup, the kernel
call and the wrapping of the result: no argument checks (a MultiVector's values were checked
when it was made), no grade arithmetic, no broadcasting for unbatched operands. A plan is None
where no straight-line kernel is made (n above the blade tables' limit, or too many terms, or two
full multivectors with n > :data:`FULL_MAX_N`, whose dense kernels compile faster and run as
fast); the caller then takes the general path.

:func:`infer_pattern` reads the grade pattern of a coefficient array from its all-zero columns
(exact: a grade is left out only when every one of its coefficients is zero in every batch entry).
"""
from __future__ import annotations

from functools import lru_cache
from math import comb

import numpy as np

from galinear._numba import readonly
from galinear.core import graded, products

__all__ = ["infer_pattern", "product_plan", "sandwich_plan", "run_plan", "FULL_MAX_N"]

#: Largest n for which a product of two full multivectors gets a straight-line kernel (4**n terms).
FULL_MAX_N = 4


@lru_cache(maxsize=None)
def _grade_blocks(n: int):
    """(first shortlex position of each grade, 2**grade) for n; grades are contiguous in shortlex order."""
    starts = np.cumsum([0] + [comb(n, k) for k in range(n)])
    return starts, np.left_shift(1, np.arange(n + 1, dtype=np.int64))


def infer_pattern(algebra, values: np.ndarray) -> int | None:
    """The grades present in ``values`` (..., 2**n): those with a non-zero coefficient (NaN counts)
    in some batch entry. None (every grade, untracked) above the blade tables' limit, where no
    graded kernel exists."""
    n = algebra.n
    if n > products.TABLE_MAX_N:
        return None
    nonzero = values != 0
    if nonzero.ndim > 1:
        nonzero = nonzero.reshape(-1, nonzero.shape[-1]).any(axis=0)
    starts, powers = _grade_blocks(n)
    return int(powers[np.logical_or.reduceat(nonzero, starts)].sum())

_PRODUCT_PLANS: dict = {}
_SANDWICH_PLANS: dict = {}


def product_plan(algebra, kind: str, pa: int, pb: int):
    """(kernel, result pattern, packed columns of the result, result holds every grade) of the
    ``kind`` product of packed operands with patterns pa, pb; None where there is no kernel."""
    key = (kind, pa, pb, algebra.metric)
    try:
        return _PRODUCT_PLANS[key]
    except KeyError:
        pass
    plan = None
    n = algebra.n
    full = graded.ALL(n)
    if n <= products.TABLE_MAX_N and not (pa == full and pb == full and n > FULL_MAX_N):
        kernel = graded._packed_product_kernel(algebra.metric, kind, pa, pb)
        if kernel is not None:
            pattern = graded.product_pattern(n, kind, pa, pb)
            plan = (kernel, pattern, len(graded.blades_of(n, pattern)), pattern == graded.ALL(n))
    _PRODUCT_PLANS[key] = plan
    return plan


def sandwich_plan(algebra, pr: int, px: int):
    r"""As :func:`product_plan`, for the fused sandwich :math:`R\, x\, \tilde R`."""
    key = (pr, px, algebra.metric)
    try:
        return _SANDWICH_PLANS[key]
    except KeyError:
        pass
    plan = None
    n = algebra.n
    full = graded.ALL(n)
    if n <= products.TABLE_MAX_N and not (pr == full and px == full and n > FULL_MAX_N):
        kernel = graded._packed_sandwich_kernel(algebra.metric, pr, px)
        if kernel is not None:
            pattern = graded.sandwich_pattern(n, algebra.metric, pr, px)
            plan = (kernel, pattern, len(graded.blades_of(n, pattern)), pattern == graded.ALL(n))
    _SANDWICH_PLANS[key] = plan
    return plan


def run_plan(plan, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel of ``plan`` on packed operands a, b (batch axes broadcast); read-only result."""
    kernel, _, columns, _ = plan
    if a.ndim == 1 and b.ndim == 1 and a.dtype is b.dtype:  # one multivector each: no broadcasting
        out = np.empty((1, columns), dtype=a.dtype)
        if columns and not kernel(readonly(a.reshape(1, -1)), readonly(b.reshape(1, -1)), out, 0, 0):
            graded._check(False, a, b)
        out = out.reshape(columns)
    else:
        out = graded._run_packed(kernel, a, b, columns)
    out.setflags(write=False)
    return out
