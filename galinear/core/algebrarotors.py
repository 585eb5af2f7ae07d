r"""Rotor maths of :class:`galinear.Algebra` (a base class of it): exp, log and the invariant
decomposition of bivectors, rotation and sandwich matrices.

Euclidean algebras use the array functions of :mod:`galinear.core.rotors` and
:mod:`galinear.core.rotor_maps`; every other signature goes through :mod:`galinear.core.signatures`.
Those functions take the algebra as a :class:`~galinear.core.layout.Layout` (its products and
tables) and import neither this module nor the Algebra.
"""
from __future__ import annotations

import math

import numpy as np

from galinear._limits import check_max_iter, check_memory, check_tolerance
from galinear.core import rotor_maps, rotors, signature_log, signatures
from galinear.core.checks import coerce_float

__all__ = ["RotorMethods"]


class RotorMethods:
    """``exp``, ``decompose``, ``log``, ``rotation_matrix`` and ``sandwich_matrix`` on top of the
    array methods of :class:`~galinear.core.layout.Layout` (the other base class of Algebra)."""

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
            return signatures.algebra_exp(self, B, method)
        b = self._bivector_arg(B)
        if method == "simple":
            rotors.check_simple(self.n, b)
            parts = b[..., None, :]
        elif method == "decompose":
            parts = rotors.decompose_exact(self.n, b).bivectors
        else:
            raise ValueError(f"method must be 'decompose' or 'simple', got {method!r}")
        return rotor_maps.from_bitmask(self.n, rotor_maps.rotor_from_parts(self.n, parts))

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
        Non-Euclidean signatures: :func:`galinear.core.signature_log.algebra_log` (the invariant
        decomposition of the bivector part of R; a ValueError where no logarithm is found).
        """
        if not self.euclidean:  # every other signature: galinear.core.signature_log
            return signature_log.algebra_log(self, R)
        R = self._rotor_arg(R)
        b = rotor_maps.rotor_log(self.n, R)
        return self.bivector(b)

    def rotation_matrix(self, R) -> np.ndarray:
        r"""The n x n rotation M of the vector map :math:`x \mapsto R x \tilde R`, shape (..., n, n).

        ``M[:, i]`` holds the coefficients of :math:`R e_i \tilde R`. For R = exp(B) it equals
        ``expm(2 A)``.
        """
        self._require_euclidean("rotation_matrix")
        R = self._rotor_arg(R)
        return rotor_maps.rotation_matrix(self.n, R)

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
        return rotor_maps.sandwich_matrix(self.n, R, S)
