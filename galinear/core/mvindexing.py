"""Grade projection, blade coefficients by name and batch indexing of
:class:`~galinear.core.algebra.MultiVector` (a mixin).

Blade names are ``"e"`` followed by the indices of the basis vectors, 1..n (``"e12"``; ``"e21"``
is ``-e12``; ``"1"`` the scalar). In an algebra with exactly one null basis vector (projective
geometric algebra, ``Algebra(3, 0, 1)``, where the null vector comes first), names that contain
the digit 0 are read with zero-based indices, as the PGA literature and kingdon write them:
``"e0"`` is the null vector (galinear's ``e1``), ``"e01"`` is galinear's ``e12``, ``"e023"``
galinear's ``e134``. Names without a 0 keep the one-based meaning, so ``x["e0"]`` and
``x["e1"]`` are the same coefficient in PGA.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from galinear import blades
from galinear.core import graded

__all__ = ["IndexingMethods", "blade_lookup", "zero_based"]


def zero_based(metric: tuple[int, ...]) -> bool:
    """True where names with a 0 are read zero-based: exactly one null vector, and it comes first."""
    return len(metric) < 10 and metric.count(0) == 1 and metric[0] == 0


@lru_cache(maxsize=4096)
def _blade_lookup(n: int, name: str) -> tuple[int, int]:
    """(shortlex index, sign) of a blade name; ``"e21"`` is ``-e12``; ``"1"``, ``"e"``, ``"scalar"`` are 1."""
    names = blades.blade_names(n)
    if name in ("1", "e", "scalar", ""):
        return 0, 1
    try:
        return names.index(name), 1
    except ValueError:
        pass
    body = name[1:] if name.startswith("e") else None
    indices = None
    if body:
        if "(" in body or "_" in body or n >= 10:
            parts = body.replace(")", "(").replace("_", "(").split("(")
            try:
                indices = [int(p) for p in parts if p]
            except ValueError:
                indices = None
        elif body.isdigit():
            indices = [int(c) for c in body]
    if not indices or any(not 1 <= i <= n for i in indices) or len(set(indices)) != len(indices):
        raise KeyError(
            f"no blade named {name!r} in Cl({n}): use 'e' followed by distinct indices 1..{n} "
            f"(e.g. 'e12', 'e21' = -e12), or '1' for the scalar part"
        )
    mask = 0
    for i in indices:
        mask |= 1 << (i - 1)
    # sign of the permutation that sorts the indices
    inversions = sum(1 for a in range(len(indices)) for b in range(a + 1, len(indices)) if indices[a] > indices[b])
    index = int(blades.bitmask_to_shortlex(n)[mask])
    return index, -1 if inversions % 2 else 1


def blade_lookup(algebra, name: str) -> tuple[int, int]:
    """(shortlex index, sign) of the blade called ``name`` in ``algebra`` (see the module notes)."""
    lookup = name
    if isinstance(name, str) and name.startswith("e") and "0" in name[1:] and zero_based(algebra.metric):
        body = name[1:]
        if body.isdigit():
            lookup = "e" + "".join(str(int(c) + 1) for c in body)
    try:
        return _blade_lookup(algebra.n, lookup)
    except KeyError:
        if "0" in name and algebra.metric.count(0) == 1 and not zero_based(algebra.metric):
            raise KeyError(f"no blade named {name!r} in {algebra!r}: zero-based names (e0, e01, ...) "
                           f"are read only when the one null vector comes first") from None
        if "0" in name and zero_based(algebra.metric):
            raise KeyError(f"no blade named {name!r} in {algebra!r}: zero-based names use e0 for the "
                           f"null vector and e1..e{algebra.n - 1} for the others (e0 = galinear's e1)") from None
        raise


class IndexingMethods:
    """``mv(2)``, ``mv.grades()``, ``mv["e12"]``, ``mv.e12`` and ``mv[i]`` on batched values."""

    __slots__ = ()

    def grade(self, *grades) -> "MultiVector":
        """Grade projection: ``mv.grade(2)``, ``mv.grade(0, 2)`` (also ``mv(2)``)."""
        wanted = graded.mask_of(g for g in grades if 0 <= g <= self.algebra.n)
        pattern = wanted if self._pattern is None else wanted & self._pattern
        return self._like(self.algebra.grade(self.values, *grades), pattern)

    __call__ = grade

    def grades(self, tol: float = 0.0) -> tuple[int, ...]:
        """Grades with a coefficient of magnitude above ``tol`` in any batch entry."""
        mags = np.abs(self.values).reshape(-1, self.algebra.dim).max(axis=0, initial=0.0)
        return tuple(sorted({int(g) for g, m in zip(self.algebra.grades, mags) if m > tol}))

    def __getitem__(self, key):
        """``mv["e12"]``: the coefficient (a numpy scalar when unbatched, else an array of the
        batch shape; ``mv["e21"]`` is its negative, of the same kind). ``mv[i]``, ``mv[1:3]``:
        batch entries of a batched multivector."""
        if isinstance(key, str):
            index, sign = blade_lookup(self.algebra, key)
            out = self.values[..., index]
            out = -out if sign < 0 else out.copy()
            return out[()] if out.ndim == 0 else out
        if not isinstance(key, tuple):
            key = (key,)
        ndim = self.ndim
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        if used > ndim:
            what = "an unbatched MultiVector has no batch axis" if ndim == 0 else f"this MultiVector has {ndim} batch axes"
            raise IndexError(
                f"index {key if len(key) > 1 else key[0]!r} has {used} batch indices but {what}; "
                f"read coefficients by blade name (mv['e12']) or from mv.values"
            )
        if any(k is Ellipsis for k in key):
            return self._like(self.values[key + (slice(None),)])
        return self._like(self.values[key + (Ellipsis, slice(None))])

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(
                f"set blade coefficients by name (mv['e12'] = 2.0), got key {key!r}; to change batch "
                f"entries build a new MultiVector(alg, values) from a modified copy of mv.values"
            )
        index, sign = blade_lookup(self.algebra, key)
        values = self.values.copy()
        values[..., index] = sign * np.asarray(value)
        pattern = None if self._pattern is None else self._pattern | 1 << int(self.algebra.grades[index])
        self._reset(values, pattern)

    def __getattr__(self, name):
        if name.startswith("e") and not name.startswith("__"):
            try:
                return self[name]
            except KeyError:
                pass
        raise AttributeError(f"'MultiVector' object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name in ("algebra", "values"):
            raise AttributeError(
                f"MultiVector.{name} is fixed at construction; build a new MultiVector(alg, values)"
            )
        if name.startswith("e"):
            try:
                blade_lookup(self.algebra, name)
            except KeyError:
                raise AttributeError(f"no blade named {name!r} in {self.algebra!r}") from None
            self[name] = value
            return
        raise AttributeError(f"'MultiVector' object has no attribute {name!r}")
