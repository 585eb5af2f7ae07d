"""The sparse product table of Cl(metric), the one table the symbolic products and inverses share.

Built from :mod:`galinear.blades` only, so :mod:`galinear.symbolic.multivector` and its mixins
(:mod:`galinear.symbolic.inverses`) both take it from here.
"""
from __future__ import annotations

from functools import lru_cache

from galinear import blades

__all__ = ["product_rules"]


@lru_cache(maxsize=32)
def product_rules(metric: tuple[int, ...]):
    """Sparse product table: for each (i, j) the target k, the sign and the grades.

    Returns a tuple of ``(i, j, k, sign, gi, gj, gk)`` with sign != 0, for the blades at
    shortlex positions i, j (``blade_i blade_j = sign * blade_k``). Built from
    :func:`galinear.blades.blade_product_sign`, so it also works above n = 10.
    """
    n = len(metric)
    masks = blades.shortlex_bitmasks(n).tolist()
    pos = blades.bitmask_to_shortlex(n)
    grades = blades.blade_grades(n).tolist()
    rules = []
    for i, a in enumerate(masks):
        for j, b in enumerate(masks):
            sign = blades.blade_product_sign(a, b, metric)
            if sign:
                k = int(pos[a ^ b])
                rules.append((i, j, k, sign, grades[i], grades[j], grades[k]))
    return tuple(rules)
