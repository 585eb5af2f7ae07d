r"""The duals of multivector arrays (..., 2**n): the metric-free right complement (Hodge) and the
polarity dual :math:`x I^{-1}`, each a signed permutation of the coefficients; see
:meth:`MultiVector.dual <galinear.core.algebra.MultiVector.dual>`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from galinear import blades
from galinear.core.layout import Layout

__all__ = ["hodge_signs", "dual"]


@lru_cache(maxsize=64)
def hodge_signs(n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Index and sign of the right complement: :math:`e_A \wedge \star e_A = e_{12\dots n}`.

    Returns ``(target, sign)``, both (2**n,) in shortlex order: :math:`\star e_A` is
    ``sign[A] * blade(target[A])``. The map is metric-free (it uses the outer product only), so
    it is the dual that works in degenerate algebras (the Hodge dual of PGA).
    """
    masks = blades.shortlex_bitmasks(n)
    pos = blades.bitmask_to_shortlex(n)
    full = (1 << n) - 1
    target = np.array([pos[full ^ int(m)] for m in masks], dtype=np.int64)
    sign = np.array([blades.reorder_sign(int(m), full ^ int(m)) for m in masks], dtype=np.float64)
    target.setflags(write=False)
    sign.setflags(write=False)
    return target, sign


@lru_cache(maxsize=64)
def _polarity_signs(metric: tuple[int, ...], inverse: bool):
    """x I^-1 (or x I when ``inverse``) as a signed permutation: blade A goes to target[A] with sign[A]."""
    alg = Layout(signature=(metric.count(1), metric.count(-1), metric.count(0)))
    I = alg.blade(alg.blade_names[-1])
    images = alg.gp(np.eye(alg.dim), I if inverse else alg.inverse(I))
    target = np.argmax(np.abs(images), axis=1)
    sign = images[np.arange(alg.dim), target]
    return target, sign


def dual(alg: Layout, x: np.ndarray, kind: str = "auto", inverse: bool = False) -> np.ndarray:
    """Dual (``inverse=False``) or undual of the array x; see :meth:`MultiVector.dual`."""
    if kind == "auto":
        kind = "hodge" if 0 in alg.metric else "polarity"
    if kind == "polarity":
        if 0 in alg.metric:
            raise ValueError(
                f"the polarity dual x I^-1 needs an invertible pseudoscalar; {alg!r} is degenerate. "
                f"Use dual(kind='hodge') (the default 'auto' does)"
            )
        target, sign = _polarity_signs(alg.metric, inverse)
        out = np.empty_like(x)
        out[..., target] = x * sign.astype(x.dtype)
        return out
    if kind == "hodge":
        target, sign = hodge_signs(alg.n)
        out = np.empty_like(x)
        if inverse:
            # star(e_A) = s_A e_{A^c}  =>  star^-1(e_{A^c}) = s_A e_A
            out[..., :] = x[..., target] * sign.astype(x.dtype)
        else:
            out[..., target] = x * sign.astype(x.dtype)
        return out
    raise ValueError(f"kind must be 'auto', 'polarity' or 'hodge', got {kind!r}")
