"""Constructors of :class:`~galinear.core.algebra.MultiVector` (a base class of it): zeros,
scalars, vectors, bivectors, named blades, the basis and the pseudoscalar, each with its grades
recorded."""
from __future__ import annotations

import numpy as np

from galinear.core.checks import coerce_float
from galinear.core.layout import Layout
from galinear.core.mvindexing import blade_lookup, zero_based

__all__ = ["ConstructorMethods"]


class ConstructorMethods:
    """Class methods building MultiVectors of known grades (through ``MultiVector._wrap``)."""

    __slots__ = ()

    # ---------------------------------------------------------------- constructors
    @classmethod
    def zeros(cls, algebra: Layout, shape=(), dtype=np.float64) -> "MultiVector":
        """Zero multivectors with batch shape ``shape`` (no grade; set blades by name)."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return cls._wrap(algebra, np.zeros(shape + (algebra.dim,), dtype=dtype), 0)

    @classmethod
    def scalar(cls, algebra: Layout, s) -> "MultiVector":
        """Scalars ``s`` (shape (...))."""
        return cls._wrap(algebra, algebra.scalar(s), 0b1)

    @classmethod
    def vector(cls, algebra: Layout, v) -> "MultiVector":
        """Vectors from coefficients (..., n) on e1..en."""
        return cls._wrap(algebra, algebra.vector(v), 0b10)

    @classmethod
    def bivector(cls, algebra: Layout, b) -> "MultiVector":
        """Bivectors from coefficients (..., C(n, 2)) in :func:`galinear.blades.bivector_pairs` order."""
        return cls._wrap(algebra, algebra.bivector(b), 0b100)

    @classmethod
    def blade(cls, algebra: Layout, name: str, coefficient=1.0) -> "MultiVector":
        """``coefficient`` times the blade called ``name`` (``"e13"``; ``"e31"`` is ``-e13``; in PGA
        also zero-based names, ``"e0"`` for the null vector: :mod:`galinear.core.mvindexing`)."""
        index, sign = blade_lookup(algebra, name)
        values = algebra.blade(algebra.blade_names[index], sign * coerce_float(coefficient))
        return cls._wrap(algebra, values, 1 << int(algebra.grades[index]))

    @classmethod
    def basis_vectors(cls, algebra: Layout) -> tuple["MultiVector", ...]:
        """The n basis vectors e1..en (for ``e1, e2, e3 = MultiVector.basis_vectors(alg)``)."""
        return tuple(cls.blade(algebra, f"e{i + 1}" if i < 9 else f"e({i + 1})") for i in range(algebra.n))

    @classmethod
    def basis(cls, algebra: Layout, zero_based_names: bool = False) -> dict[str, "MultiVector"]:
        """Every basis blade by name, in shortlex order: ``{"1": 1, "e1": e1, ..., "e12": e12, ...}``.

        ``zero_based_names=True`` (algebras whose one null vector comes first, such as PGA
        ``Algebra(3, 0, 1)``): keys ``"e0"`` (the null vector), ``"e1"``, ..., ``"e01"``, ... as
        kingdon and the PGA literature name them; the blades are the same, only the keys change.
        """
        if zero_based_names and not zero_based(algebra.metric):
            raise ValueError(
                f"zero-based names need exactly one null basis vector, coming first (e.g. Algebra(3, 0, 1)); "
                f"{algebra!r} has metric {algebra.metric}"
            )
        out = {}
        for name in algebra.blade_names:
            key = name if not zero_based_names or name == "1" else "e" + "".join(str(int(c) - 1) for c in name[1:])
            out[key] = cls.blade(algebra, name)
        return out

    @classmethod
    def pseudoscalar(cls, algebra: Layout) -> "MultiVector":
        """The unit pseudoscalar :math:`I = e_{12\\dots n}`."""
        return cls._wrap(algebra, algebra.blade(algebra.blade_names[-1]), 1 << algebra.n)
