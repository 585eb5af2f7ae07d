r"""Conveniences of :class:`~galinear.core.algebra.MultiVector` (a mixin): ``float(x)``,
``abs(x)``, ``x.clean()``, rotor ``x.sqrt()``, ``1.5 & x``, a constructor from blade names,
``sympy.latex(x)``, and the coercion of operands (real numbers, arrays of them, and errors that
name the fix for everything else).

Operands: a real number mixes in anywhere (as a scalar multivector), and so does a numpy array of
real numbers, read as a *batch* of scalars: ``np.arange(3.0) * e1`` is a batch of 3 vectors
(batch axes broadcast as in numpy). Complex coefficients are refused (see :data:`COMPLEX_REASON`).
"""
from __future__ import annotations

import numpy as np

from galinear.core.mvindexing import blade_lookup

__all__ = ["ConvenienceMethods", "is_scalar_array", "scalar_operand", "operand_error", "COMPLEX_REASON"]

#: Why complex coefficients are refused, and what to do instead.
COMPLEX_REASON = (
    "complex coefficients are not supported: galinear's kernels, rotor maps and checks work on "
    "real float32/float64 arrays. Where a unit pseudoscalar squares to -1 it plays the role of i "
    "(e123 in Algebra(3), e12 in Algebra(2)): write a + b*I with real a, b; or hold the real and "
    "imaginary parts as two MultiVectors"
)


def is_scalar_array(x) -> bool:
    """A numpy array (ndim >= 1) of real numbers: a batch of scalars."""
    return isinstance(x, np.ndarray) and x.ndim > 0 and x.dtype.kind in "iuf"


def scalar_operand(s):
    """A real scalar as is; an array of scalars with a trailing axis, to scale (..., 2**n) values."""
    return s[..., None] if isinstance(s, np.ndarray) and s.ndim > 0 else s


def operand_error(other) -> TypeError:
    """The TypeError for an operand that is neither a MultiVector nor real numbers, naming the fix."""
    kind = type(other)
    module = kind.__module__.split(".")[0]
    name = f"{module}.{kind.__name__}" if module != "builtins" else kind.__name__
    if module == "clifford":
        fix = "convert it first with MultiVector.from_clifford(x) (and back with mv.to_clifford())"
    elif module == "kingdon":
        fix = "convert it first with MultiVector.from_kingdon(x) (and back with mv.to_kingdon())"
    elif module == "galinear" and hasattr(other, "coefficients"):
        fix = "a symbolic multivector does not mix with numeric ones; substitute numbers first"
    elif isinstance(other, complex) or (isinstance(other, np.ndarray) and other.dtype.kind == "c"):
        return TypeError(COMPLEX_REASON)
    elif isinstance(other, (list, tuple)):
        fix = "use np.asarray(...) for a batch of scalars, or MultiVector(alg, values) for coefficients"
    else:
        fix = "use a real number, an array of them, or MultiVector(alg, values) for coefficient arrays"
    return TypeError(f"cannot combine a galinear MultiVector with {name}; {fix}")


class ConvenienceMethods:
    """``float``, ``abs``, ``clean``, ``sqrt``, ``1.5 & x``, :meth:`from_blades` and LaTeX for sympy."""

    __slots__ = ()

    # ---------------------------------------------------------------- numbers
    def __float__(self) -> float:
        """The scalar of an unbatched multivector whose other coefficients are all zero."""
        values = self.values
        if values.ndim != 1:
            raise TypeError(
                f"float() of a batched MultiVector (batch shape {self.shape}); take the scalar parts "
                f"as an array with mv['1']"
            )
        rest = float(np.abs(values[1:]).max(initial=0.0))
        if rest != 0.0:
            raise ValueError(
                f"float() of a MultiVector with non-scalar parts (largest coefficient {rest:.3g}, grades "
                f"{self.grades()}); take the scalar part with float(mv.grade(0)), or drop round-off "
                f"first with float(mv.clean(eps))"
            )
        return float(values[0])

    def __abs__(self):
        r"""The norm :math:`\sqrt{|\langle \tilde x x\rangle_0|}` (:meth:`norm`, clifford's ``abs``):
        a float64/float32 number when unbatched, else an array of the batch shape."""
        out = self.norm()
        return out[()] if out.ndim == 0 else out

    def clean(self, eps: float = 1e-10) -> "MultiVector":
        """A copy with every coefficient of magnitude <= ``eps`` set to zero (grades read again)."""
        eps = float(eps)
        if not eps >= 0.0:
            raise ValueError(f"clean(eps) needs eps >= 0, got {eps!r}")
        values = np.where(np.abs(self.values) <= eps, 0.0, self.values).astype(self.values.dtype, copy=False)
        return self._wrap(self.algebra, values)

    def sqrt(self) -> "MultiVector":
        r"""Square root of a unit rotor R: the rotor S with :math:`S^2 = R` on the same branch as
        the algebra's log, :math:`S = \exp(\tfrac12 \log R)`.

        In Euclidean algebras with n <= 3 every rotor is simple and S is the normalised
        :math:`(1 + R)/|1 + R|` (the half-angle rotor; same result, no log), except near
        R = -1 (a rotation by pi in every plane: 1 + R vanishes), which takes the log path.
        Other algebras: :meth:`Algebra.log` (a ValueError where R has no real logarithm).
        """
        alg = self.algebra
        if alg.euclidean and alg.n <= 3:
            one_plus = self + 1.0
            size = one_plus.norm()
            if np.all(size > np.sqrt(np.finfo(self.values.dtype).eps)):
                alg._rotor_arg(self.values, "R")  # a unit rotor, as the log path checks
                return one_plus._like(one_plus.values / size[..., None])
        return (self.log() * 0.5).exp()

    # ---------------------------------------------------------------- operators
    def __rand__(self, other):
        """``s & x`` for a real number (or an array of them) s: the regressive product s v x."""
        return self._wrap(self.algebra, *self._operand(other)).regressive(self)

    # ---------------------------------------------------------------- construction by name
    @classmethod
    def from_blades(cls, algebra, coefficients=None, /, **blades) -> "MultiVector":
        """``from_blades(alg, e12=2, e1=1)`` or ``from_blades(alg, {"e12": 2, "1": 0.5})``.

        Names as ``mv["e12"]`` reads them (``e21`` is ``-e12``; ``1`` or ``scalar`` the scalar;
        zero-based ``e0...`` names in PGA, see :mod:`galinear.core.mvindexing`). A coefficient may
        be an array: the result is batched, with the broadcast shape of all coefficients. The
        grades are those of the named blades. The dtype is float64 unless every coefficient is a
        float32 array. A blade given twice (``{"e12": 2}`` and ``e12=3``, or ``e12`` and ``e21``)
        is refused rather than summed.
        """
        items = list((coefficients or {}).items()) + list(blades.items())
        if not items:
            raise ValueError("from_blades needs at least one blade, e.g. from_blades(alg, e12=2.0)")
        arrays = []
        for name, c in items:
            if not isinstance(name, str):
                raise TypeError(f"blade names are strings such as 'e12', got {name!r}")
            c = np.asarray(c)
            if c.dtype.kind == "c":
                raise TypeError(COMPLEX_REASON)
            if c.dtype.kind not in "iuf" or c.dtype == np.bool_:
                raise TypeError(f"the coefficient of {name!r} must be real numbers, got dtype {c.dtype}")
            arrays.append(c)
        dtype = np.float32 if all(c.dtype == np.float32 for c in arrays) else np.float64
        shape = np.broadcast_shapes(*(c.shape for c in arrays))
        values = np.zeros(shape + (algebra.dim,), dtype=dtype)
        pattern = 0
        seen = {}
        for (name, _), c in zip(items, arrays):
            index, sign = blade_lookup(algebra, name)
            if index in seen:
                raise ValueError(f"from_blades: the blade {name!r} is given twice (also as {seen[index]!r}); "
                                 "give each blade once, e.g. add the coefficients first")
            seen[index] = name
            values[..., index] += sign * c
            pattern |= 1 << int(algebra.grades[index])
        if not np.isfinite(values).all():
            raise ValueError("from_blades: every coefficient must be finite (got NaN or infinity)")
        return cls._wrap(algebra, values, pattern)

    # ---------------------------------------------------------------- printing for sympy
    def _latex(self, printer=None) -> str:
        """LaTeX for ``sympy.latex(mv)`` (the printer calls this hook): :meth:`latex`."""
        return self.latex()
