r"""Invariant decomposition in torch: bivector -> exactly simple factor pairs (V, W).

The bivector <-> skew-matrix conversions, the wedge of vectors, the power and exact
decompositions and their stop tolerance; see :mod:`galinear.nn.functional` for the conventions.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from galinear._generated import rotor_spec
from galinear.blades import bivector_pairs
from galinear.nn._eager import eager_under_compile
from galinear.nn.functional._common import _HALF_TYPES, _compiling, cached_table


def _dimension_from_bivectors(m: int) -> int:
    """n with C(n, 2) == m, else ValueError."""
    n = int(round((1 + math.sqrt(1 + 8 * m)) / 2)) if m > 0 else None
    if n is None or n * (n - 1) // 2 != m:
        raise ValueError(
            f"a bivector's last axis must hold C(n, 2) coefficients for some n >= 2 "
            f"(1, 3, 6, 10, 15, ...), got {m}"
        )
    return n


@cached_table
def _pair_index(n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    pairs = torch.tensor(np.array(bivector_pairs(n)), dtype=torch.long, device=device)
    cached = (pairs[:, 0].contiguous(), pairs[:, 1].contiguous())
    return cached


def bivector_to_skew(bivector: torch.Tensor) -> torch.Tensor:
    """Skew matrix A (..., n, n) with A[i, j] = b_ij = -A[j, i] for a bivector (..., C(n,2))."""
    n = _dimension_from_bivectors(bivector.shape[-1])
    rows, cols = _pair_index(n, bivector.device)
    index = rows * n + cols
    upper = bivector.new_zeros(*bivector.shape[:-1], n * n).index_copy(-1, index, bivector)
    upper = upper.reshape(*bivector.shape[:-1], n, n)
    return upper - upper.transpose(-1, -2)


def skew_to_bivector(matrix: torch.Tensor) -> torch.Tensor:
    """Bivector coefficients (..., C(n,2)) read from the upper triangle of a skew matrix."""
    n = int(matrix.shape[-1])
    rows, cols = _pair_index(n, matrix.device)
    return matrix[..., rows, cols]


def wedge(v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Bivector coefficients of v ^ w: (v ^ w)_ij = v_i w_j - v_j w_i, i < j."""
    rows, cols = _pair_index(v.shape[-1], v.device)
    return v[..., rows] * w[..., cols] - v[..., cols] * w[..., rows]


def default_tolerance(dtype: torch.dtype) -> float:
    """Stop tolerance of the power iteration for a dtype (rotor spec: 1e-10 float64, 1e-5 float32)."""
    return rotor_spec.POWER_TOL["float64" if dtype == torch.float64 else "float32"]


class FactorPairs(NamedTuple):
    """Result of :func:`invariant_decomposition`: the factor pairs, their warm starts, the steps taken.

    V, W: factor pairs (..., k, n) (b_j = v_j ^ w_j); warm_start: unit vectors (..., k, n),
    detached, to pass as ``warm_start`` next time; iterations: power steps taken in the
    refresh pass (the most over all rows and planes; 0 for the exact method).
    """

    V: torch.Tensor
    W: torch.Tensor
    warm_start: torch.Tensor
    iterations: int


def _power_plane(remainder, v, tol, max_iter, unroll):
    """Per-row power iteration on A^2 = (v _| A) _| A from the unit vectors v (the rotor spec's
    power contract, as :func:`galinear.core.rotors.decompose_power`).

    The iteration runs on A / max|A_ij| (the scale is a constant for the gradient, and the
    direction of A^2 v does not depend on it), so A^2 v neither overflows nor underflows. Takes
    at least one step; a row stops once |v_new + v| < tol (A^2 is negative semi-definite, so a
    converged vector flips sign at every step). Where |A^2 v| <= (POWER_VANISH eps)^2 (v
    orthogonal to the range of A) the row restarts once from the longest column of A, if that
    column is longer than POWER_VANISH eps; otherwise it stops and keeps v (a zero plane).
    A stopped row is frozen, so checking "all rows stopped?" (a device sync) only after steps
    1, 2, 4, 8, 12, ... changes nothing but the number of syncs.
    Returns the final v, the most steps any row took and the rows still active (not converged).
    """
    vanish = rotor_spec.POWER_VANISH * torch.finfo(remainder.dtype).eps
    tiny = vanish * vanish
    with torch.no_grad():
        scale = remainder.detach().abs().amax(dim=(-2, -1), keepdim=True)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    scaled = remainder / scale
    square = scaled @ scaled
    lengths = torch.linalg.vector_norm(scaled, dim=-2)  # (..., n): the column lengths
    longest, which = lengths.max(dim=-1)
    column = torch.gather(scaled, -1, which[..., None, None].expand(*scaled.shape[:-1], 1)).squeeze(-1)
    column = column / longest.clamp_min(tiny).unsqueeze(-1)
    can_restart = longest > vanish
    active = torch.ones(v.shape[:-1], dtype=torch.bool, device=v.device)
    restarted = torch.zeros_like(active)
    row_steps = torch.zeros(v.shape[:-1], dtype=torch.int32, device=v.device)
    for step in range(1, max_iter + 1):
        image = (square @ v.unsqueeze(-1)).squeeze(-1)
        norm = torch.linalg.vector_norm(image, dim=-1, keepdim=True)
        moved = (norm > tiny).squeeze(-1)
        restart = ~moved & can_restart & ~restarted
        v_new = torch.where(moved.unsqueeze(-1), image / norm.clamp_min(tiny),
                            torch.where(restart.unsqueeze(-1), column, v))
        done = (moved & (torch.linalg.vector_norm(v_new + v, dim=-1) < tol)) | (~moved & ~restart)
        v = torch.where(active.unsqueeze(-1), v_new, v)
        restarted = restarted | (restart & active)
        row_steps = row_steps + active
        active = active & ~done
        if not unroll and (step <= 2 or step % 4 == 0) and not bool(active.any()):
            break
    return v, (max_iter if unroll else int(row_steps.max()) if row_steps.numel() else 1), active


def _power_factors(matrix, start, tol, max_iter, unroll, unconverged=None):
    """All k planes by power iteration with deflation; returns V, W, steps.

    The last plane takes ``rotor_spec.POWER_LAST_PLANE_STEPS`` (one) step: after k - 1
    deflations the remainder has rank <= 2, so one step recovers it exactly.
    ``unconverged``: a boolean tensor of the batch shape, or None; rows where some plane (the
    last excepted) stopped at ``max_iter`` without meeting the stop test are or-ed into it in place.
    """
    k = start.shape[-2]
    vs, ws = [], []
    most = 0
    remainder = matrix
    for j in range(k):
        last = j == k - 1
        steps_allowed = min(max_iter, rotor_spec.POWER_LAST_PLANE_STEPS) if last else max_iter
        v, steps, active = _power_plane(remainder, start[..., j, :], tol, steps_allowed, unroll)
        if unconverged is not None and not last:
            unconverged |= active
        most = max(most, steps)
        w = -(remainder @ v.unsqueeze(-1)).squeeze(-1)  # w = v _| R
        remainder = remainder - (v.unsqueeze(-1) * w.unsqueeze(-2) - w.unsqueeze(-1) * v.unsqueeze(-2))
        vs.append(v)
        ws.append(w)
    if k == 0:
        empty = matrix.new_zeros(*matrix.shape[:-2], 0, matrix.shape[-1])
        return empty, empty, 0
    return torch.stack(vs, dim=-2), torch.stack(ws, dim=-2), most


class Spectrum(NamedTuple):
    r"""Eigen-decomposition :math:`iA = U \mathrm{diag}(\mu) U^H` of the skew matrices A of bivectors.

    mu: (..., n) float64, ascending (pairs :math:`\pm\theta_j`, and 0 for odd n); U: (..., n, n)
    complex128. One of these serves both the planes of the exact decomposition and the gradient
    of the exponential (:mod:`galinear.nn.dexp`).
    """

    mu: torch.Tensor
    U: torch.Tensor


def spectrum(bivector: torch.Tensor) -> Spectrum:
    """The :class:`Spectrum` of bivectors (..., C(n, 2)): one Hermitian eigh in complex128, no gradient."""
    matrix = bivector_to_skew(bivector.detach().to(torch.float64))  # checks the last axis is C(n, 2)
    mu, U = torch.linalg.eigh(1j * matrix.to(torch.complex128))
    return Spectrum(mu, U)


def planes_from_spectrum(matrix: torch.Tensor, spec: Spectrum, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The k factor pairs (V, W) of the skew matrices ``matrix`` (..., n, n) from their spectrum.

    An eigenvector u = a + ib of iA with eigenvalue :math:`\theta > 0` has A a = theta b and
    A b = -theta a, with |a| = |b| and a orthogonal to b (u is orthogonal to its conjugate, the
    eigenvector of -theta), and eigenvectors of one eigenvalue give orthogonal planes: so the k
    largest eigenvalues, in decreasing order, give k orthogonal invariant planes, largest angle
    first. v is the unit real part (or imaginary part, whichever is longer: a kernel vector may be
    purely imaginary) and w = v _| A = -A v, as in the power method, so the planes sum to B.
    """
    top = spec.U[..., :, -k:].flip(-1) if k else spec.U[..., :, :0]   # (..., n, k): largest first
    real, imag = top.real, top.imag
    use_imag = torch.linalg.vector_norm(imag, dim=-2, keepdim=True) > torch.linalg.vector_norm(real, dim=-2, keepdim=True)
    vectors = torch.where(use_imag, imag, real).transpose(-1, -2)    # (..., k, n)
    vectors = vectors / torch.linalg.vector_norm(vectors, dim=-1, keepdim=True).clamp_min(torch.finfo(vectors.dtype).tiny)
    v = vectors.to(matrix.dtype)
    w = -(v @ matrix.transpose(-1, -2))                                # w_j = -A v_j
    return v, w


def exact_factors(bivector: torch.Tensor, n: int | None = None) -> tuple[torch.Tensor, torch.Tensor, Spectrum | None]:
    """(V, W, spectrum) of bivectors (..., C(n, 2)) from one eigen-decomposition, without gradients:
    the factors of the ``"exact"`` method and the spectrum that the exact gradient reuses.
    ``n``: the dimension, needed only to shape the empty factors of Cl(0) and Cl(1) (default 1)."""
    if bivector.shape[-1] == 0:  # Cl(0) or Cl(1): no planes, the rotor is 1, no spectrum
        empty = bivector.new_zeros(*bivector.shape[:-1], 0, 1 if n is None else n)
        return empty, empty, None
    with torch.no_grad():
        spec = spectrum(bivector)
        n = spec.mu.shape[-1]
        work = bivector.detach().float() if bivector.dtype in _HALF_TYPES else bivector.detach()
        V, W = planes_from_spectrum(bivector_to_skew(work), spec, n // 2)
    if bivector.dtype in _HALF_TYPES:
        V, W = V.to(bivector.dtype), W.to(bivector.dtype)
    return V, W, spec


def _exact_factors(matrix, k):
    """All k planes of skew matrices from one eigen-decomposition (:func:`planes_from_spectrum`)."""
    if k == 0:
        empty = matrix.new_zeros(*matrix.shape[:-2], 0, matrix.shape[-1])
        return empty, empty
    spec = spectrum(skew_to_bivector(matrix))
    return planes_from_spectrum(matrix, spec, k)


@eager_under_compile
def invariant_decomposition(
    bivector: torch.Tensor,
    warm_start: torch.Tensor | None = None,
    *,
    tol: float | None = None,
    max_iter: int = rotor_spec.POWER_MAX_ITER,
    method: str = "power",
    refresh: bool = True,
) -> FactorPairs:
    r"""Split bivectors into k = floor(n/2) exactly simple factors v_j ^ w_j.

    ``method="power"`` (the paper's Algorithm 2, per row): for plane j, iterate
    :math:`v \leftarrow \mathrm{normalize}((v \rfloor R) \rfloor R)` from the warm start (at least
    one step, at most ``max_iter``, a row stops when :math:`|v_{new} + v| <` ``tol``), set
    :math:`w = v \rfloor R`, :math:`b_j = v \wedge w` and deflate :math:`R \leftarrow R - b_j`.
    As in the paper the iteration runs twice: once without gradients to refresh the start
    vectors, then once with gradients from the refreshed vectors (usually a single step). Rows
    whose refresh pass meets ``max_iter`` before the stop test (nearly equal angles converge
    slowly) take their planes from the ``"exact"`` method instead, so the factors give exp(B)
    at every point.

    The last plane is taken by one power step (the rotor spec's ``POWER_LAST_PLANE_STEPS``)
    rather than as the remainder (the rotor-factor convention of docs/nn.md wants factor pairs). This changes nothing mathematically: every v is a power step of the
    current remainder R, hence lies in its range, so deflation keeps R's kernel and adds v to
    it; skew matrices have even rank, so each plane lowers the rank by 2 and the remainder after
    k-1 planes has rank <= 2: it *is* simple, one power step recovers it exactly, and the pieces
    sum to B exactly even before convergence (tested for n = 5..8). Before convergence the planes
    are not orthogonal, so prod_j exp(b_j) is a unit rotor but not exp(B); at convergence it is.
    At B = 0 exactly (no direction to iterate) the start vectors are kept: values are finite
    (the identity rotor) and gradients finite, but only the components of the gradient that touch
    the start vectors survive (the decomposition is not differentiable at a zero plane).

    ``method="exact"``: one eigen-decomposition of the Hermitian matrix :math:`iA`
    (:func:`exact_factors`) finds all planes (no gradient: eigh's is infinite inside each doubly degenerate eigenvalue
    pair), then one power step with gradients, as in the power method; same factors at
    convergence.

    Parameters
    ----------
    bivector : (..., C(n, 2)) tensor.
    warm_start : (..., k, n) start vectors (need not be unit); ``None`` = fixed deterministic
        vectors.
    tol : stop tolerance; default :func:`default_tolerance` of the dtype.
    max_iter : most power steps per plane and pass (>= 1).
    method : ``"power"`` or ``"exact"``.
    refresh : power method only. True (the paper): the no-gradient refresh pass, then the pass
        with gradients from the refreshed vectors; the gradient treats the refreshed vectors as
        constants (a one-step approximation of the derivative of the converged planes). False:
        a single pass with gradients from ``warm_start``, whose gradient is the exact derivative
        of that finite iteration.

    Returns
    -------
    FactorPairs(V, W, warm_start, iterations)
    """
    if not isinstance(bivector, torch.Tensor):
        raise TypeError(f"bivector must be a torch.Tensor, got {type(bivector).__name__}")
    if not bivector.is_floating_point():
        raise TypeError(f"bivector must be a floating-point tensor, got dtype {bivector.dtype}")
    if method not in ("power", "exact"):
        raise ValueError(f"method must be 'power' or 'exact', got {method!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1 (at least one power step), got {max_iter!r}")
    if bivector.shape[-1] == 0:  # Cl(0) or Cl(1): no planes, the rotor is 1
        n = warm_start.shape[-1] if warm_start is not None else 1
        empty = bivector.new_zeros(*bivector.shape[:-1], 0, n)
        return FactorPairs(empty, empty, empty, 0)
    n = _dimension_from_bivectors(bivector.shape[-1])
    k = n // 2
    dtype = bivector.dtype
    work = bivector.float() if dtype in _HALF_TYPES else bivector
    matrix = bivector_to_skew(work)
    batch = bivector.shape[:-1]
    if warm_start is None:
        warm_start = _default_start(n, k, work.dtype, work.device).expand(*batch, k, n)
    else:
        if warm_start.shape[-2:] != (k, n):
            raise ValueError(
                f"warm_start must have shape (..., {k}, {n}) for bivectors of Cl({n}), "
                f"got {tuple(warm_start.shape)}"
            )
        warm_start = warm_start.detach().to(work.dtype)
    warm_start = warm_start / torch.linalg.vector_norm(warm_start, dim=-1, keepdim=True).clamp_min(
        torch.finfo(work.dtype).tiny
    )
    if tol is None:
        tol = default_tolerance(work.dtype)
    if method == "exact":
        # eigh's gradient is infinite within every (always doubly degenerate) pair of
        # eigenvalues of -A^2, so the planes are found without gradients and the gradient
        # flows through one power step from them, as in the power method.
        with torch.no_grad():
            refreshed, _ = _exact_factors(matrix.detach(), k)
        V, W, _ = _power_factors(matrix, refreshed, 0.0, 1, True)
        steps = 0
    else:
        unroll = _compiling()
        if refresh:
            with torch.no_grad():
                unconverged = torch.zeros(batch, dtype=torch.bool, device=matrix.device)
                refreshed, _, steps = _power_factors(
                    matrix.detach(), warm_start, tol, max_iter, unroll, unconverged
                )
                if not unroll and bool(unconverged.any()):
                    # Rows that met max_iter (nearly equal angles converge slowly): their planes
                    # come from the eigen-decomposition, so the factors are exp(B) at every point.
                    flat = refreshed.reshape(-1, k, n).clone()
                    rows = unconverged.reshape(-1)
                    flat[rows] = _exact_factors(matrix.detach().reshape(-1, n, n)[rows], k)[0]
                    refreshed = flat.reshape(refreshed.shape)
            V, W, _ = _power_factors(matrix, refreshed, tol, max_iter, unroll)
        else:
            V, W, steps = _power_factors(matrix, warm_start, tol, max_iter, unroll)
            refreshed = V
    if dtype in _HALF_TYPES:
        V, W = V.to(dtype), W.to(dtype)
    return FactorPairs(V, W, refreshed.detach(), steps)


def _default_start(n, k, dtype, device):
    """Fixed start vectors of the rotor spec: plane j starts at (1, 1, ..., 1) + e_{2j}."""
    return torch.tensor(rotor_spec.power_start(n), dtype=dtype, device=device).reshape(k, n)


def factors_to_bivectors(V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The simple bivectors b_j = v_j ^ w_j, shape (..., k, C(n, 2))."""
    return wedge(V, W)
