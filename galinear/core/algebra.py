r"""The :class:`Algebra` class: batched multivector maths in Cl(p, q, r).

A multivector of Cl(n), n = p + q + r, is a numpy array whose last axis holds its 2**n
coefficients in shortlex blade order (see :mod:`galinear.blades`); every method broadcasts over
the leading axes and keeps float32 or float64 (integers become float64).
"""
from __future__ import annotations

import math
from math import comb

import numpy as np

from galinear import blades
from galinear._limits import check_max_iter, check_memory, check_tolerance
from galinear.core import checks, maps, products, rotors
from galinear.core.checks import _check_finite, coerce_float  # noqa: F401  (imported from here by other modules)
from galinear.core.products import AUTO_GENERATED_MAX_N  # noqa: F401  (documented here)

__all__ = ["Algebra", "coerce_float", "scaled_inverse"]


def scaled_inverse(x: np.ndarray, invert, dtype=None) -> np.ndarray:
    """``invert`` applied at unit scale: :math:`x^{-1} = y^{-1} / p` with :math:`y = x / p`, p the
    largest |coefficient| of each multivector (1 for zero rows), so huge and tiny inputs neither
    overflow nor underflow on the way. The result is cast to ``dtype`` (default x's); an
    OverflowError naming the limit when it does not fit (x too small). Used by
    :meth:`Algebra.inverse` and :meth:`galinear.MultiVector.inv`.
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


class Algebra:
    r"""The Clifford algebra Cl(p, q, r) with batched numpy/numba operations.

    Parameters
    ----------
    p, q, r : int
        Numbers of basis vectors squaring to +1, -1 and 0. ``Algebra(3)`` is Euclidean Cl(3).
        Following the ``clifford`` package, the r null vectors come first, then the p positive
        ones, then the q negative ones.
    signature : tuple of int, optional
        ``(p,)``, ``(p, q)`` or ``(p, q, r)``; an alternative to the positional arguments.

    Attributes
    ----------
    n : int
        Dimension of the vector space, p + q + r.
    dim : int
        Number of coefficients, 2**n.
    metric : tuple of int
        Squares of the basis vectors, e.g. ``(1, 1, 1)``.
    signature : tuple of int
        ``(p, q, r)``.
    euclidean : bool
        True when every basis vector squares to +1 (required by the rotor methods).

    Notes
    -----
    Coefficients are stored in shortlex order (grade, then lexicographic): ``1, e1, e2, e3, e12,
    e13, e23, e123`` for n = 3. :attr:`bitmasks` maps shortlex positions to blade bitmasks and
    :attr:`shortlex_index` maps back.
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
        return isinstance(other, Algebra) and other.metric == self.metric

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

    def multivector(self, coefficients=None, /, **blades):
        """A :class:`~galinear.MultiVector` by blade names: ``alg.multivector(e12=2, e1=1)`` or
        ``alg.multivector({"e12": 2, "1": 0.5})`` (kingdon's style); the same as
        :meth:`MultiVector.from_blades(alg, ...) <galinear.MultiVector.from_blades>`, whose name
        rules, batching and errors apply. The other constructors here return arrays."""
        from galinear.core.multivector import MultiVector  # at call time: multivector.py imports this module

        return MultiVector.from_blades(self, coefficients, **blades)

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

    def exp(self, B, method: str = "decompose") -> np.ndarray:
        r"""Exponential of a bivector: a rotor with :math:`R \tilde R = 1`, shape (..., 2**n).

        Any signature: non-Euclidean algebras (boosts, PGA motors, conformal rotors) go through
        :func:`galinear.core.signatures.algebra_exp`, the invariant decomposition of Roelfs and
        De Keninck for every signature; the notes below describe the Euclidean path.

        Parameters
        ----------
        B : array_like, shape (..., 2**n)
            A bivector.
        method : {"decompose", "simple"}
            ``"decompose"`` (any bivector): split B into commuting simple parts :math:`b_j`
            (exact invariant decomposition) and multiply
            :math:`\exp b_j = \cos|b_j| + \operatorname{sinc}|b_j|\, b_j`.
            ``"simple"``: the closed form for a simple B (error if B ^ B is not ~0).

        Notes
        -----
        Convention: the vector part of :math:`e^B x e^{-B}` is ``expm(2 A)`` with A the skew matrix
        ``A[i, j] = b_ij``. Finite (= 1) at B = 0.
        """
        if not self.euclidean:  # every other signature: galinear.core.signatures
            from galinear.core import signatures

            return signatures.algebra_exp(self, B, method)
        b = self._bivector_arg(B)
        if method == "simple":
            rotors.check_simple(self.n, b)
            parts = b[..., None, :]
        elif method == "decompose":
            parts = rotors.decompose_exact(self.n, b).bivectors
        else:
            raise ValueError(f"method must be 'decompose' or 'simple', got {method!r}")
        return maps.from_bitmask(self.n, maps.rotor_from_parts(self.n, parts))

    def decompose(self, B, method: str = "exact", **options):
        r"""Invariant decomposition of a bivector into commuting simple parts.

        Non-Euclidean signatures return a
        :class:`galinear.core.signatures.SignatureDecomposition` (parts from the invariants
        :math:`b_j^2 = \lambda_j`, method "exact" only); the rest describes the Euclidean path.

        :math:`B = \sum_{j<k} b_j` with k = floor(n/2), every :math:`b_j = \theta_j\, u_j \wedge w_j`
        on mutually orthogonal planes (Roelfs and De Keninck 2021).

        Parameters
        ----------
        B : array_like, shape (..., 2**n)
        method : {"exact", "power"}
            ``"exact"``: from the eigen-structure of the skew matrix (equal angles, zero planes
            and odd n handled). ``"power"``: the power iteration with deflation of Pence et al.
            (2025), options ``start``, ``tol``, ``max_iter``, ``fallback``; see
            :func:`galinear.core.rotors.decompose_power`.

        Returns
        -------
        galinear.core.rotors.Decomposition
            ``bivectors`` (..., k, C(n,2)), ``angles`` (..., k), ``planes`` (..., k, 2, n) and,
            for the power method, ``residual``, ``start``, ``iterations``, ``converged``.
            :meth:`Decomposition.parts` gives full multivectors.
        """
        if not self.euclidean:  # every other signature: galinear.core.signatures
            from galinear.core import signatures

            return signatures.algebra_decompose(self, B, method, **options)
        b = self._bivector_arg(B)
        if method == "exact":
            if options:
                raise TypeError(f"the exact decomposition takes no options, got {sorted(options)}")
            return rotors.decompose_exact(self.n, b)
        if method == "power":
            unknown = sorted(set(options) - {"start", "tol", "max_iter", "fallback"})
            if unknown:
                raise TypeError(f"the power decomposition takes start, tol, max_iter and fallback, got {unknown}")
            check_tolerance(options.get("tol"), owner="Algebra.decompose")
            check_max_iter(options.get("max_iter", 1), owner="Algebra.decompose")
            return rotors.decompose_power(self.n, b, **options)
        raise ValueError(f"method must be 'exact' or 'power', got {method!r}")

    def log(self, R) -> np.ndarray:
        r"""Logarithm of a rotor: a bivector B with ``exp(B) = R`` (Euclidean: angles in [0, pi]).

        R must be even with :math:`R \tilde R = 1` (checked). For n < 2 only R = 1 has a log.
        Non-Euclidean signatures: :func:`galinear.core.signatures.algebra_log` (the invariant
        decomposition of the bivector part of R; a ValueError where no logarithm is found).
        """
        if not self.euclidean:  # every other signature: galinear.core.signatures
            from galinear.core import signatures

            return signatures.algebra_log(self, R)
        R = self._rotor_arg(R)
        b = maps.rotor_log(self.n, R)
        return self.bivector(b)

    def _rotor_arg(self, R, name: str = "R") -> np.ndarray:
        """R itself after checking it is a unit rotor (even, R ~R = 1); ValueError naming the fix."""
        R = self._mv(R, name)
        return checks.unit_rotor(self.n, R, self.gp(R, self.reverse(R)), name)

    def rotation_matrix(self, R) -> np.ndarray:
        r"""The n x n rotation M of the vector map :math:`x \mapsto R x \tilde R`, shape (..., n, n).

        ``M[:, i]`` holds the coefficients of :math:`R e_i \tilde R`. For R = exp(B) it equals
        ``expm(2 A)``.
        """
        self._require_euclidean("rotation_matrix")
        R = self._rotor_arg(R)
        return maps.rotation_matrix(self.n, R)

    def sandwich_matrix(self, R, S=None) -> np.ndarray:
        r"""Dense (..., 2**n, 2**n) matrix of :math:`x \mapsto R x \tilde S` (S = R if omitted).

        Column j is the image of the j-th basis blade. For unit rotors it is orthogonal; a single
        rotor preserves grades, a double rotor preserves parity.
        """
        self._require_euclidean("sandwich_matrix")
        # the (..., 2**n, 2**n) result and two factor matrices of that size: refuse before any work
        R_arr = coerce_float(R, "R")
        S_arr = R_arr if S is None else coerce_float(S, "S")
        try:
            rows = math.prod(np.broadcast_shapes(R_arr.shape[:-1], S_arr.shape[:-1]))
        except ValueError:
            raise ValueError(
                f"sandwich_matrix: the batch shapes of R {R_arr.shape[:-1]} and S {S_arr.shape[:-1]} do not "
                "broadcast; give equal leading axes, or 1 where one rotor is shared"
            ) from None
        itemsize = np.result_type(R_arr.dtype, S_arr.dtype).itemsize
        check_memory(f"sandwich_matrix of {rows} rotor(s) in {self!r}", 3 * rows * self.dim**2 * itemsize,
                     fix="use fewer rotors per call or apply the rotors directly (alg.gp)")
        R = self._rotor_arg(R, "R")
        S = R if S is None else self._rotor_arg(S, "S")
        return maps.sandwich_matrix(self.n, R, S)

    # ------------------------------------------------------------------ order helpers
    def _to_bitmask(self, x: np.ndarray) -> np.ndarray:
        return maps.to_bitmask(self.n, x)

    def _from_bitmask(self, x: np.ndarray) -> np.ndarray:
        return maps.from_bitmask(self.n, x)
