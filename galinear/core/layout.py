r"""Cl(p, q, r) on coefficient arrays: :class:`Layout`, the signature, blade tables, products,
involutions, inverses and array constructors that every other part of the core builds on.

A multivector of Cl(n), n = p + q + r, is a numpy array whose last axis holds its 2**n
coefficients in shortlex blade order (see :mod:`galinear.blades`); every method broadcasts over
the leading axes and keeps float32 or float64 (integers become float64).

:class:`galinear.Algebra` is a :class:`Layout` with the rotor maths
(:class:`galinear.core.algebrarotors.RotorMethods`) and :meth:`~galinear.Algebra.multivector`.
The array functions below it (:mod:`galinear.core.signatures`, :mod:`~galinear.core.invariants`,
:mod:`~galinear.core.meetjoin`, :mod:`~galinear.core.duality`, :mod:`~galinear.core.inverses`,
:mod:`~galinear.core.outermorphisms`) take a Layout, and build one where
they need an algebra of their own (the Euclidean one of a meet, the polarity signs of a metric).
"""
from __future__ import annotations

from math import comb

import numpy as np

from galinear import blades
from galinear.core import checks, products, rotor_maps
from galinear.core.checks import _check_finite, coerce_float

__all__ = ["Layout", "scaled_inverse"]

def scaled_inverse(x: np.ndarray, invert, dtype=None) -> np.ndarray:
    """``invert`` applied at unit scale: :math:`x^{-1} = y^{-1} / p` with :math:`y = x / p`, p the
    largest |coefficient| of each multivector (1 for zero rows), so huge and tiny inputs neither
    overflow nor underflow on the way. The result is cast to ``dtype`` (default x's); an
    OverflowError naming the limit when it does not fit (x too small). Used by
    :meth:`galinear.Algebra.inverse` and :meth:`galinear.MultiVector.inv`.
    """
    dtype = np.dtype(x.dtype if dtype is None else dtype)
    peak = np.abs(x).max(axis=-1, keepdims=True, initial=0.0)
    peak = np.where(peak > 0, peak, 1).astype(x.dtype)
    inverse = invert(x / peak)
    with np.errstate(over="ignore", under="ignore"):
        out = (inverse / peak).astype(dtype)
    if not np.isfinite(out).all():
        raise OverflowError(
            f"the inverse overflows {dtype}: x is too small (largest coefficient "
            f"{float(peak.min()):.3g}; 1/x exceeds the largest {dtype}, {float(np.finfo(dtype).max):.3g})"
        )
    return out


class Layout:
    r"""The Clifford algebra Cl(p, q, r) on coefficient arrays (the base of :class:`galinear.Algebra`).

    Takes the arguments of :class:`galinear.Algebra` and holds its attributes (``n``, ``dim``,
    ``metric``, ``signature``, ``euclidean``, ``grades``, ``bitmasks``, ``shortlex_index``) and its
    array methods: products, involutions, grade projection, norms, the versor inverse,
    constructors, coefficient extraction and clifford interop. A Layout and an Algebra of the same
    metric are equal.
    """

    def __init__(self, p=None, q=0, r=0, *, signature=None):
        if signature is not None:
            if p is not None:
                raise ValueError("give either Algebra(p, q, r) or Algebra(signature=(p, q, r)), not both")
            if isinstance(signature, (int, np.integer)) and not isinstance(signature, bool):
                raise TypeError(
                    f"signature must be a tuple (p,), (p, q) or (p, q, r), got the number {signature!r}; "
                    f"write Algebra({signature}) or Algebra(signature=({signature},)) for Cl({signature})"
                )
            try:
                signature = tuple(signature)
            except TypeError:
                raise TypeError(
                    f"signature must be a tuple (p,), (p, q) or (p, q, r) of non-negative integers, got {signature!r}"
                ) from None
            if not 1 <= len(signature) <= 3:
                raise ValueError(f"signature must be (p,), (p, q) or (p, q, r), got {signature!r}")
            p, q, r = (tuple(signature) + (0, 0))[:3]
        elif p is None:
            raise ValueError("Algebra needs a dimension: Algebra(n), Algebra(p, q, r) or Algebra(signature=(p, q, r))")
        checks.signature_counts(p, q, r)
        self.metric = blades.metric_from_signature(p, q, r)
        self.signature = (int(p), int(q), int(r))
        self.n = len(self.metric)
        self.dim = 2**self.n
        self.euclidean = all(m == 1 for m in self.metric)
        self.grades = blades.blade_grades(self.n)
        self.bitmasks = blades.shortlex_bitmasks(self.n)
        self.shortlex_index = blades.bitmask_to_shortlex(self.n)
        g = self.grades
        self._reverse_sign = np.where((g * (g - 1) // 2) % 2 == 0, 1.0, -1.0)
        self._involute_sign = np.where(g % 2 == 0, 1.0, -1.0)
        self._conjugate_sign = self._reverse_sign * self._involute_sign
        # product of the squares of the vectors in each blade: e_A e_A = reverse_sign * metric_square
        square = np.ones(self.dim)
        for i, m in enumerate(self.metric):
            square = np.where((self.bitmasks >> i) & 1, square * m, square)
        self._metric_square = square
        self._metric_array = np.array(self.metric, dtype=np.int64)
        self._clifford_layout = None

    # ------------------------------------------------------------------ basics
    def __repr__(self) -> str:
        p, q, r = self.signature
        if self.euclidean:
            return f"Algebra({self.n})"
        return f"Algebra({p}, {q}, {r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and other.metric == self.metric

    def __hash__(self) -> int:
        return hash(("galinear.Algebra", self.metric))

    @property
    def blade_names(self) -> tuple[str, ...]:
        """Blade names in shortlex order: ``("1", "e1", ..., "e12", ...)``."""
        return blades.blade_names(self.n)

    @property
    def num_bivectors(self) -> int:
        """C(n, 2), the number of bivector coefficients."""
        return comb(self.n, 2)

    def _mv(self, x, name: str = "x", check_finite: bool = True) -> np.ndarray:
        arr = coerce_float(x, name)
        if arr.ndim == 0 or arr.shape[-1] != self.dim:
            raise ValueError(
                f"{name} must have its last axis of length 2**n = {self.dim} (the coefficients of a "
                f"multivector of {self!r}), got shape {arr.shape}"
            )
        if check_finite:
            _check_finite(arr, name)
        return arr

    # ------------------------------------------------------------------ products
    def _binary(self, kind: str, a, b, method: str) -> np.ndarray:
        if method not in products.METHODS:
            raise ValueError(f"method must be one of {', '.join(map(repr, products.METHODS))}, got {method!r}")
        a = self._mv(a, "a", check_finite=False)
        b = self._mv(b, "b", check_finite=False)
        dtype = np.result_type(a.dtype, b.dtype)
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"{kind}: the batch shapes of a {a.shape[:-1]} and b {b.shape[:-1]} do not broadcast; give "
                "equal leading axes, or 1 where one multivector is shared (e.g. a of shape (1, dim))"
            ) from None
        a2 = np.ascontiguousarray(np.broadcast_to(a, shape), dtype=dtype).reshape(-1, self.dim)
        b2 = np.ascontiguousarray(np.broadcast_to(b, shape), dtype=dtype).reshape(-1, self.dim)
        return products.multiply(self.metric, kind, a2, b2, method, repr(self)).reshape(shape)

    def gp(self, a, b, method: str = "auto") -> np.ndarray:
        r"""Geometric product :math:`a b`, batched over leading axes.

        Parameters
        ----------
        a, b : array_like, shape (..., 2**n)
        method : {"auto", "table", "generated"}
            ``"table"``: the table-driven numba kernel (any n); ``"generated"``: the straight-line
            kernel written by the symbolic generator (error if none exists for this metric);
            ``"auto"``: the generated kernel for n <= :data:`AUTO_GENERATED_MAX_N` when one
            exists (the range where the benchmark measured it faster), else the table.
        """
        return self._binary("gp", a, b, method)

    def op(self, a, b, method: str = "auto") -> np.ndarray:
        r"""Outer product :math:`a \wedge b = \sum_{r,s} \langle a_r b_s \rangle_{r+s}`."""
        return self._binary("op", a, b, method)

    def lc(self, a, b, method: str = "auto") -> np.ndarray:
        r"""Left contraction :math:`a \rfloor b = \sum_{r \le s} \langle a_r b_s \rangle_{s-r}`."""
        return self._binary("lc", a, b, method)

    def rc(self, a, b, method: str = "auto") -> np.ndarray:
        r"""Right contraction :math:`a \lfloor b = \sum_{r \ge s} \langle a_r b_s \rangle_{r-s}`."""
        return self._binary("rc", a, b, method)

    def scalar_product(self, a, b) -> np.ndarray:
        r"""Scalar product :math:`a * b = \langle a b \rangle_0`, shape (...) (no last axis).

        Only matching blades contribute: :math:`\sum_A a_A b_A\, e_A e_A`.
        """
        a = self._mv(a, "a")
        b = self._mv(b, "b")
        dtype = np.result_type(a.dtype, b.dtype)
        weight = (self._reverse_sign * self._metric_square).astype(dtype)
        return np.einsum("...i,...i->...", a * weight, b.astype(dtype, copy=False))

    # ------------------------------------------------------------------ unary maps
    def reverse(self, x) -> np.ndarray:
        r"""Reversion :math:`\tilde x`: grade g gets the sign :math:`(-1)^{g(g-1)/2}`."""
        x = self._mv(x)
        return x * self._reverse_sign.astype(x.dtype)

    def involute(self, x) -> np.ndarray:
        r"""Grade involution :math:`\hat x`: grade g gets the sign :math:`(-1)^g`."""
        x = self._mv(x)
        return x * self._involute_sign.astype(x.dtype)

    def conjugate(self, x) -> np.ndarray:
        r"""Clifford conjugate :math:`\bar x = \hat{\tilde x}`: sign :math:`(-1)^{g(g+1)/2}`."""
        x = self._mv(x)
        return x * self._conjugate_sign.astype(x.dtype)

    def grade(self, x, *grades) -> np.ndarray:
        r"""Grade projection :math:`\langle x \rangle_g` (several grades: their sum).

        ``alg.grade(x, 2)`` keeps the bivector part; ``alg.grade(x, 0, 2, 4)`` the listed grades.
        """
        x = self._mv(x)
        if len(grades) == 1 and not np.isscalar(grades[0]):
            grades = tuple(grades[0])
        if not grades:
            raise ValueError("grade() needs at least one grade, e.g. alg.grade(x, 2)")
        for g in grades:
            if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g <= self.n:
                raise ValueError(f"grades must be integers in 0..{self.n} for {self!r}, got {g!r}")
        mask = np.isin(self.grades, np.array(grades, dtype=np.int64))
        return x * mask.astype(x.dtype)

    def norm_squared(self, x) -> np.ndarray:
        r"""The scalar :math:`\langle \tilde x x \rangle_0` (may be negative in mixed signatures)."""
        x = self._mv(x)
        return np.einsum("...i,...i,i->...", x, x, self._metric_square.astype(x.dtype))

    def norm(self, x) -> np.ndarray:
        r"""Norm :math:`\sqrt{|\langle \tilde x x \rangle_0|}`, shape (...) (as ``abs`` in clifford).

        In a Euclidean algebra this is the 2-norm of the coefficient vector.
        """
        return np.sqrt(np.abs(self.norm_squared(x)))

    def inverse(self, x, check: bool = True) -> np.ndarray:
        r"""Inverse of a versor: :math:`x^{-1} = \tilde x / \langle x \tilde x \rangle_0`.

        Parameters
        ----------
        x : array_like, shape (..., 2**n)
            A versor (a product of invertible vectors), so that :math:`x \tilde x` is a scalar.
        check : bool
            Verify that :math:`x \tilde x` is a non-zero scalar (one geometric product); a
            ValueError names the rows that are not invertible versors.
        """
        return scaled_inverse(self._mv(x), lambda y: self._versor_inverse(y, check))

    def _versor_inverse(self, x: np.ndarray, check: bool) -> np.ndarray:
        """:meth:`inverse` of x whose largest coefficient is about 1 (no scaling)."""
        rev = self.reverse(x)
        if check:
            xx = self.gp(x, rev)
            scalar = xx[..., 0]
            rest = np.sqrt(np.sum(xx[..., 1:] ** 2, axis=-1))
            scale = np.sum(x * x, axis=-1)
            tol = 1e3 * np.finfo(x.dtype).eps * np.maximum(scale, np.finfo(x.dtype).tiny)
            bad = (rest > tol) | (np.abs(scalar) <= tol)
            if np.any(bad):
                raise ValueError(
                    f"inverse() expects invertible versors (x ~x a non-zero scalar); "
                    f"{int(np.sum(bad))} of {bad.size} inputs are not"
                )
        else:
            scalar = self.scalar_product(x, rev)
        return rev / scalar[..., None]

    # ------------------------------------------------------------------ construction
    def scalar(self, s) -> np.ndarray:
        """Multivectors with scalar part ``s`` (shape (...)) and nothing else."""
        s = coerce_float(s, "s")
        _check_finite(s, "s")
        out = np.zeros(s.shape + (self.dim,), dtype=s.dtype)
        out[..., 0] = s
        return out

    def vector(self, v) -> np.ndarray:
        """Vectors from coefficients ``v`` of shape (..., n) on e1..en."""
        v = coerce_float(v, "v")
        if v.ndim == 0 or v.shape[-1] != self.n:
            raise ValueError(f"vector coefficients must have last axis n = {self.n}, got shape {v.shape}")
        _check_finite(v, "v")
        out = np.zeros(v.shape[:-1] + (self.dim,), dtype=v.dtype)
        out[..., 1 : 1 + self.n] = v
        return out

    def bivector(self, b) -> np.ndarray:
        """Bivectors from coefficients ``b`` (..., C(n, 2)) in :func:`galinear.blades.bivector_pairs` order."""
        b = coerce_float(b, "b")
        m = self.num_bivectors
        if b.ndim == 0 or b.shape[-1] != m:
            raise ValueError(
                f"bivector coefficients must have last axis C(n, 2) = {m} for {self!r}, got shape {b.shape}"
            )
        _check_finite(b, "b")
        out = np.zeros(b.shape[:-1] + (self.dim,), dtype=b.dtype)
        out[..., 1 + self.n : 1 + self.n + m] = b
        return out

    def blade(self, name: str, coefficient=1.0) -> np.ndarray:
        """The basis blade called ``name`` (``"1"``, ``"e2"``, ``"e13"``) times ``coefficient``."""
        index = blades.blade_index(self.n, name)
        c = coerce_float(coefficient, "coefficient")
        _check_finite(c, "coefficient")
        out = np.zeros(c.shape + (self.dim,), dtype=c.dtype)
        out[..., index] = c
        return out

    def vector_coefficients(self, x) -> np.ndarray:
        """The e1..en coefficients of x, shape (..., n)."""
        return self._mv(x)[..., 1 : 1 + self.n]

    def bivector_coefficients(self, x) -> np.ndarray:
        """The grade-2 coefficients of x, shape (..., C(n, 2)), in bivector_pairs order."""
        return self._mv(x)[..., 1 + self.n : 1 + self.n + self.num_bivectors]

    # ------------------------------------------------------------------ clifford interop
    def clifford_layout(self):
        """The ``clifford`` layout of this algebra (imports clifford on first use)."""
        if self._clifford_layout is None:
            import clifford

            p, q, r = self.signature
            layout, _ = clifford.Cl(p, q, r)
            self._clifford_layout = layout
        return self._clifford_layout

    def to_clifford(self, x):
        """A ``clifford.MultiVector`` (1-D x) or a ``clifford.MVArray`` (batched x) with the same coefficients."""
        import clifford

        x = self._mv(x)
        layout = self.clifford_layout()
        if x.ndim == 1:
            return layout.MultiVector(np.array(x, dtype=np.float64))
        flat = x.reshape(-1, self.dim)
        out = np.empty(flat.shape[0], dtype=object)
        for i, row in enumerate(flat):
            out[i] = layout.MultiVector(np.array(row, dtype=np.float64))
        return clifford.MVArray(out.reshape(x.shape[:-1]))

    def from_clifford(self, mv) -> np.ndarray:
        """Coefficients (..., 2**n) from a ``clifford.MultiVector`` or an array/list of them."""
        import clifford

        if isinstance(mv, clifford.MultiVector):
            if mv.layout.sig.tolist() != list(self.metric):
                raise ValueError(
                    f"the multivector belongs to an algebra with metric {tuple(mv.layout.sig.tolist())}, "
                    f"this algebra has {self.metric}"
                )
            return np.array(mv.value, dtype=np.float64)
        items = np.asarray(mv, dtype=object)
        flat = [self.from_clifford(m) for m in items.reshape(-1)]
        return np.array(flat, dtype=np.float64).reshape(items.shape + (self.dim,))

    # ------------------------------------------------------------------ rotors
    def _require_euclidean(self, what: str) -> None:
        if not self.euclidean:
            raise ValueError(
                f"{what} is implemented for Euclidean algebras only (every e_i^2 = +1); "
                f"{self!r} has metric {self.metric}. Use Algebra(n) for rotor maths."
            )

    def _bivector_arg(self, B, name: str = "B") -> np.ndarray:
        """Compact bivector coefficients (..., C(n,2)) of a full multivector that must be a bivector."""
        return checks.bivector_part(self.n, self._mv(B, name), name)

    def _rotor_arg(self, R, name: str = "R") -> np.ndarray:
        """R itself after checking it is a unit rotor (even, R ~R = 1); ValueError naming the fix."""
        R = self._mv(R, name)
        return checks.unit_rotor(self.n, R, self.gp(R, self.reverse(R)), name)

    # ------------------------------------------------------------------ order helpers
    def _to_bitmask(self, x: np.ndarray) -> np.ndarray:
        return rotor_maps.to_bitmask(self.n, x)

    def _from_bitmask(self, x: np.ndarray) -> np.ndarray:
        return rotor_maps.from_bitmask(self.n, x)
