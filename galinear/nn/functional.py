r"""Differentiable rotor maths in torch: invariant decomposition, simple rotors, sandwich maps.

Conventions (shared with the rest of galinear): a multivector of Euclidean Cl(n) is a tensor
(..., 2**n) in shortlex order; a bivector is (..., C(n, 2)) in ``galinear.blades.bivector_pairs``
order and corresponds to the skew matrix :math:`A_{ij} = b_{ij}` (:math:`i < j`); the left
contraction of a vector by it is :math:`v \rfloor B = -A v`.

A rotor is handed around as factor pairs (V, W), each (..., k, n) with k = floor(n/2):

.. math::

    b_j = v_j \wedge w_j, \quad \theta_j = |b_j|, \quad
    R_j = \cos\theta_j + \frac{\sin\theta_j}{\theta_j} b_j, \quad R = R_0 R_1 \cdots R_{k-1}.

Because every :math:`b_j` is exactly simple, every :math:`R_j` is a unit rotor and every map
:math:`x \mapsto R x \tilde S` built from factors is exactly orthogonal, converged or not.

Pipeline: :func:`invariant_decomposition` (bivector -> factors, the power iteration of Pence,
Yamada & Singh 2025, Algorithms 1-2) -> :func:`rotor_sandwich` (factors -> map, through a
backend of the registry: ``"dense"`` builds the 2**n x 2**n matrix, ``"factored"`` applies the
simple rotors directly with signed permutations).
"""
from __future__ import annotations

import importlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import torch

from galinear.blades import bivector_pairs
from galinear.nn import _tables

__all__ = [
    "Decomposition",
    "bivector_to_skew",
    "skew_to_bivector",
    "wedge",
    "invariant_decomposition",
    "factors_to_bivectors",
    "simple_rotor_coefficients",
    "exp_simple",
    "simple_rotors",
    "compose_rotors",
    "left_vector_product",
    "right_vector_product",
    "sandwich_matrix",
    "rotor_sandwich",
    "register_sandwich_backend",
    "available_sandwich_backends",
    "resolve_sandwich_backend",
    "fwht",
    "default_tolerance",
]

_HALF_TYPES = (torch.float16, torch.bfloat16)
#: Constant tables per (kind, n, device[, dtype]), built once from galinear.blades.
_TABLE_CACHE: dict = {}


def _dimension_from_bivectors(m: int) -> int:
    """n with C(n, 2) == m, else ValueError."""
    n = int(round((1 + math.sqrt(1 + 8 * m)) / 2)) if m > 0 else None
    if n is None or n * (n - 1) // 2 != m:
        raise ValueError(
            f"a bivector's last axis must hold C(n, 2) coefficients for some n >= 2 "
            f"(1, 3, 6, 10, 15, ...), got {m}"
        )
    return n


def _pair_index(n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    key = ("pairs", n, str(device))
    cached = _TABLE_CACHE.get(key)
    if cached is None:
        pairs = torch.tensor(np.array(bivector_pairs(n)), dtype=torch.long, device=device)
        cached = _TABLE_CACHE[key] = (pairs[:, 0].contiguous(), pairs[:, 1].contiguous())
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
    n = matrix.shape[-1]
    rows, cols = _pair_index(n, matrix.device)
    return matrix[..., rows, cols]


def wedge(v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Bivector coefficients of v ^ w: (v ^ w)_ij = v_i w_j - v_j w_i, i < j."""
    rows, cols = _pair_index(v.shape[-1], v.device)
    return v[..., rows] * w[..., cols] - v[..., cols] * w[..., rows]


def default_tolerance(dtype: torch.dtype) -> float:
    """Stop tolerance of the power iteration for a dtype: 1e-10 (float64), 1e-5 (float32)."""
    return 1e-10 if dtype == torch.float64 else 1e-5


class Decomposition(NamedTuple):
    """Result of :func:`invariant_decomposition`.

    V, W: factor pairs (..., k, n) (b_j = v_j ^ w_j); warm_start: unit vectors (..., k, n),
    detached, to pass as ``warm_start`` next time; iterations: power steps taken in the
    refresh pass (the most over all rows and planes; 0 for the exact method).
    """

    V: torch.Tensor
    W: torch.Tensor
    warm_start: torch.Tensor
    iterations: int


def _compiling() -> bool:
    try:
        return bool(torch.compiler.is_compiling())
    except AttributeError:  # pragma: no cover - very old torch
        return False


def _power_plane(matrix, v, tol, max_iter, unroll):
    """Per-row power iteration on A^2 = (v _| A) _| A from the unit vectors v.

    Takes at least one step; a row stops once |v_new + v| < tol (A^2 is negative semi-definite,
    so a converged vector flips sign at every step) or when A^2 v vanishes (then v is kept).
    A stopped row is frozen, so checking "all rows stopped?" (a device sync) only after steps
    1, 2, 4, 8, 12, ... changes nothing but the number of syncs.
    Returns the final v, the most steps any row took and the rows still active (not converged).
    """
    tiny = torch.finfo(matrix.dtype).eps ** 2
    square = matrix @ matrix
    active = torch.ones(v.shape[:-1], dtype=torch.bool, device=v.device)
    row_steps = torch.zeros(v.shape[:-1], dtype=torch.int32, device=v.device)
    for step in range(1, max_iter + 1):
        image = (square @ v.unsqueeze(-1)).squeeze(-1)
        norm = torch.linalg.vector_norm(image, dim=-1, keepdim=True)
        moved = norm > tiny
        v_new = torch.where(moved, image / norm.clamp_min(tiny), v)
        done = (torch.linalg.vector_norm(v_new + v, dim=-1) < tol) | ~moved.squeeze(-1)
        v = torch.where(active.unsqueeze(-1), v_new, v)
        row_steps = row_steps + active
        active = active & ~done
        if not unroll and (step <= 2 or step % 4 == 0) and not bool(active.any()):
            break
    return v, (max_iter if unroll else int(row_steps.max()) if row_steps.numel() else 1), active


def _power_factors(matrix, start, tol, max_iter, unroll, unconverged=None):
    """All k planes by power iteration with deflation; returns V, W, steps.

    ``unconverged``: a boolean tensor of the batch shape, or None; rows where some plane stopped
    at ``max_iter`` without meeting the stop test are or-ed into it in place.
    """
    k = start.shape[-2]
    vs, ws = [], []
    most = 0
    remainder = matrix
    for j in range(k):
        v, steps, active = _power_plane(remainder, start[..., j, :], tol, max_iter, unroll)
        if unconverged is not None:
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


def _exact_factors(matrix, k):
    """All k planes from symmetric eigen-decompositions of -R^2 with deflation."""
    vs, ws = [], []
    remainder = matrix
    for _ in range(k):
        _, vectors = torch.linalg.eigh(-(remainder @ remainder))
        v = vectors[..., :, -1]
        w = -(remainder @ v.unsqueeze(-1)).squeeze(-1)
        remainder = remainder - (v.unsqueeze(-1) * w.unsqueeze(-2) - w.unsqueeze(-1) * v.unsqueeze(-2))
        vs.append(v)
        ws.append(w)
    if k == 0:
        empty = matrix.new_zeros(*matrix.shape[:-2], 0, matrix.shape[-1])
        return empty, empty
    return torch.stack(vs, dim=-2), torch.stack(ws, dim=-2)


@torch.compiler.disable
def invariant_decomposition(
    bivector: torch.Tensor,
    warm_start: torch.Tensor | None = None,
    *,
    tol: float | None = None,
    max_iter: int = 100,
    method: str = "power",
    refresh: bool = True,
) -> Decomposition:
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

    The last plane is also taken by a power step rather than as the remainder (the rotor-factor convention of docs/nn.md
    wants factor pairs). This changes nothing mathematically: every v is a power step of the
    current remainder R, hence lies in its range, so deflation keeps R's kernel and adds v to
    it; skew matrices have even rank, so each plane lowers the rank by 2 and the remainder after
    k-1 planes has rank <= 2: it *is* simple, one power step recovers it exactly, and the pieces
    sum to B exactly even before convergence (tested for n = 5..8). Before convergence the planes
    are not orthogonal, so prod_j exp(b_j) is a unit rotor but not exp(B); at convergence it is.
    At B = 0 exactly (no direction to iterate) the start vectors are kept: values are finite
    (the identity rotor) and gradients finite, but only the components of the gradient that touch
    the start vectors survive (the decomposition is not differentiable at a zero plane).

    ``method="exact"``: eigen-decompositions of :math:`-R^2` (torch.linalg.eigh) with deflation
    find the planes (no gradient: eigh's is infinite inside each doubly degenerate eigenvalue
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
    Decomposition(V, W, warm_start, iterations)
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
        return Decomposition(empty, empty, empty, 0)
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
    return Decomposition(V, W, refreshed.detach(), steps)


def _default_start(n, k, dtype, device):
    """Fixed start vectors: plane j starts at (1, 1, ..., 1) + e_{2j} (never orthogonal to much)."""
    start = torch.ones(k, n, dtype=dtype, device=device)
    if k:
        start[torch.arange(k), 2 * torch.arange(k)] += 1.0
    return start


def factors_to_bivectors(V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The simple bivectors b_j = v_j ^ w_j, shape (..., k, C(n, 2))."""
    return wedge(V, W)


_SERIES_LIMIT = 1e-2


def _cos_sinc_of_square(square: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(t) and sin(t)/t as functions of s = t**2 >= 0: analytic, so finite gradients at 0.

    Below s = 1e-2 a Taylor series in s to s**4 (error < 3e-17), above it sqrt/cos/sin.
    """
    small = square < _SERIES_LIMIT
    s = torch.where(small, square, torch.zeros_like(square))
    cos_series = 1 + s * (-1 / 2 + s * (1 / 24 + s * (-1 / 720 + s * (1 / 40320))))
    sinc_series = 1 + s * (-1 / 6 + s * (1 / 120 + s * (-1 / 5040 + s * (1 / 362880))))
    t = torch.sqrt(torch.where(small, torch.full_like(square, _SERIES_LIMIT), square))
    return torch.where(small, cos_series, torch.cos(t)), torch.where(small, sinc_series, torch.sin(t) / t)


def simple_rotor_coefficients(V: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""(cos theta_j, sin theta_j / theta_j), each (..., k), theta_j = |v_j ^ w_j|.

    :math:`\theta^2 = |v|^2 |w|^2 - (v\cdot w)^2` is never square-rooted near 0, so value and
    gradient are finite at theta = 0 (there R_j = 1 + b_j to first order).
    """
    dtype = V.dtype
    if dtype in _HALF_TYPES:
        V, W = V.float(), W.float()
    vv = (V * V).sum(-1)
    ww = (W * W).sum(-1)
    vw = (V * W).sum(-1)
    square = (vv * ww - vw * vw).clamp_min(0)
    cos, sinc = _cos_sinc_of_square(square)
    return cos.to(dtype), sinc.to(dtype)


def _wedge_square_norm(bivector: torch.Tensor, n: int) -> torch.Tensor:
    """|b ^ b| from the 4-index Pfaffian minors 2 (b_ij b_kl - b_ik b_jl + b_il b_jk), i<j<k<l."""
    from itertools import combinations

    if n < 4:
        return bivector.new_zeros(bivector.shape[:-1])
    index = {tuple(pair): m for m, pair in enumerate(bivector_pairs(n).tolist())}
    quads = list(combinations(range(n), 4))
    cols = [[index[(i, j)], index[(k, l)], index[(i, k)], index[(j, l)], index[(i, l)], index[(j, k)]]
            for i, j, k, l in quads]
    g = bivector[..., torch.as_tensor(cols, device=bivector.device)]  # (..., quads, 6)
    minors = 2 * (g[..., 0] * g[..., 1] - g[..., 2] * g[..., 3] + g[..., 4] * g[..., 5])
    return torch.linalg.vector_norm(minors, dim=-1)


def exp_simple(bivector: torch.Tensor, check: bool = True) -> torch.Tensor:
    r"""exp of a *simple* bivector as a multivector (..., 2**n): cos|b| + (sin|b|/|b|) b.

    Finite in value and gradient at b = 0 (series in |b|^2). The formula is exp(b) only for a
    simple b (b ^ b = 0): with ``check`` (default) a bivector with
    :math:`|b \wedge b| > 10^3 \epsilon |b|^2` raises ValueError (for any bivector use
    :func:`galinear.nn.dexp.rotor_exp`, or decompose first with :func:`invariant_decomposition`).
    """
    n = _dimension_from_bivectors(bivector.shape[-1])
    if check and n >= 4:
        with torch.no_grad():
            size = (bivector.detach() * bivector.detach()).sum(-1)
            wedge_norm = _wedge_square_norm(bivector.detach(), n)
            bound = 1e3 * torch.finfo(bivector.dtype).eps * size
            bad = wedge_norm > bound
            if bool(bad.any()):
                worst = float((wedge_norm / size.clamp_min(torch.finfo(bivector.dtype).tiny)).max())
                raise ValueError(
                    f"exp_simple needs simple bivectors (b ^ b = 0), got |b ^ b| / |b|^2 up to {worst:.3g}; "
                    "for any bivector use galinear.nn.dexp.rotor_exp(b) (exact, via the invariant "
                    "decomposition) or split it first with invariant_decomposition"
                )
    square = (bivector * bivector).sum(-1)
    work_square = square.float() if bivector.dtype in _HALF_TYPES else square
    cos, sinc = _cos_sinc_of_square(work_square)
    cos, sinc = cos.to(bivector.dtype), sinc.to(bivector.dtype)
    out = bivector.new_zeros(*bivector.shape[:-1], 2**n)
    out = out.index_copy(-1, torch.tensor([0], device=bivector.device), cos.unsqueeze(-1))
    start = 1 + n
    return out.index_copy(
        -1, torch.arange(start, start + bivector.shape[-1], device=bivector.device), sinc.unsqueeze(-1) * bivector
    )


def simple_rotors(V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The k simple rotors R_j as multivectors, shape (..., k, 2**n)."""
    return exp_simple(wedge(V, W), check=False) if V.shape[-1] >= 2 else V.new_ones(*V.shape[:-1], 1)


# ---------------------------------------------------------------------------------------------
# Products with vectors: n signed permutations of the coefficients.

def _vector_tables(n: int, device, dtype):
    key = ("vector", n, str(device), dtype)
    tables = _TABLE_CACHE.get(key)
    if tables is None:
        gather, left, right = _tables.vector_tables(n)
        left_adjoint = np.take_along_axis(left, gather, axis=1)
        right_adjoint = np.take_along_axis(right, gather, axis=1)
        tables = (
            torch.as_tensor(np.array(gather, dtype=np.int64), device=device),
            torch.as_tensor(left.astype(np.float64), device=device).to(dtype),
            torch.as_tensor(right.astype(np.float64), device=device).to(dtype),
            torch.as_tensor(left_adjoint.astype(np.float64), device=device).to(dtype),
            torch.as_tensor(right_adjoint.astype(np.float64), device=device).to(dtype),
        )
        _TABLE_CACHE[key] = tables
    return tables


def _full_tables(n: int, device, dtype):
    key = ("full", n, str(device), dtype)
    tables = _TABLE_CACHE.get(key)
    if tables is None:
        index, left, right = _tables.full_tables(n)
        tables = (
            torch.as_tensor(np.array(index, dtype=np.int64), device=device),
            torch.as_tensor(left.astype(np.float64), device=device).to(dtype),
            torch.as_tensor(right.astype(np.float64), device=device).to(dtype),
            torch.as_tensor(_tables.reverse_signs(n).astype(np.float64), device=device).to(dtype),
        )
        _TABLE_CACHE[key] = tables
    return tables


class _SignedPermutationSum(torch.autograd.Function):
    """Coefficient-first layout: x (d, P, B), v (P, n) -> y (d, P, B) with
    y[c, p] = sum_i v[p, i] sign[i, c] x[gather[i, c], p] (gather[i] an involution, so the
    adjoint is the same gather with ``adjoint_sign[i, c] = sign[i, gather[i, c]]``).

    Rows of the coefficient axis are gathered whole (index_select on dim 0), which is several
    times faster than gathering along the last axis; backward recomputes the gathers instead of
    saving n copies of x.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, v, gather, sign, adjoint_sign):
        return _permutation_sum(x, v, gather, sign)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, v, gather, sign, adjoint_sign = inputs
        ctx.save_for_backward(x, v, gather, sign, adjoint_sign)

    @staticmethod
    def backward(ctx, grad):
        x, v, gather, sign, adjoint_sign = ctx.saved_tensors
        grad_x = grad_v = None
        if ctx.needs_input_grad[0]:
            grad_x = _permutation_sum(grad, v, gather, adjoint_sign)
        if ctx.needs_input_grad[1]:
            n = sign.shape[0]
            reuse = not (_functorch_wrapped(x) or _functorch_wrapped(grad))
            buffer = torch.empty_like(x) if reuse else None
            columns = []
            for i in range(n):
                if reuse:
                    torch.index_select(x, 0, gather[i], out=buffer)
                    moved = buffer.mul_(grad)
                else:
                    moved = x.index_select(0, gather[i]) * grad
                columns.append((moved.sum(-1) * sign[i].unsqueeze(-1)).sum(0))  # (P,)
            grad_v = torch.stack(columns, dim=-1)
        return grad_x, grad_v, None, None, None


def _functorch_wrapped(tensor) -> bool:
    try:
        return bool(torch._C._functorch.is_functorch_wrapped_tensor(tensor))
    except AttributeError:  # pragma: no cover - torch without functorch internals
        return True


def _permutation_sum(x, v, gather, sign):
    """sum_i (v[:, i] * sign[i]) * x[gather[i]] in the (d, P, B) layout.

    Fresh multi-megabyte tensors cost page faults on every first touch, so the gathered rows go
    through one reused buffer and the sum accumulates in place (outside functorch transforms,
    which need the out-of-place form).
    """
    n = sign.shape[0]
    coefficient = v.t().unsqueeze(1) * sign.unsqueeze(-1)  # (n, d, P)
    out = x.index_select(0, gather[0]) * coefficient[0].unsqueeze(-1)
    if _functorch_wrapped(x) or _functorch_wrapped(v):
        for i in range(1, n):
            out = out + x.index_select(0, gather[i]) * coefficient[i].unsqueeze(-1)
        return out
    buffer = torch.empty_like(x) if n > 1 else None
    for i in range(1, n):
        torch.index_select(x, 0, gather[i], out=buffer)
        out.addcmul_(buffer, coefficient[i].unsqueeze(-1))
    return out


def _vector_product_t(xt, v, left):
    """Vector product in the (d, P, B) layout: v xt (left) or xt v (right); v (P, n)."""
    n = v.shape[-1]
    gather, left_sign, right_sign, left_adjoint, right_adjoint = _vector_tables(n, xt.device, xt.dtype)
    if left:
        return _SignedPermutationSum.apply(xt, v, gather, left_sign, left_adjoint)
    return _SignedPermutationSum.apply(xt, v, gather, right_sign, right_adjoint)


def _to_coefficient_first(x, v):
    """x (..., P, d) -> (d, P, B) for v (P, n) (or (n,), then P = 1)."""
    d = x.shape[-1]
    P = v.shape[0] if v.dim() == 2 else 1
    if v.dim() == 1:
        v = v.unsqueeze(0)
        x = x.unsqueeze(-2)
    lead = x.shape[:-2]
    return _SwapOuterAxes.apply(x.reshape(-1, P, d)), v, lead, d


def _check_vector_product(x, v):
    n = v.shape[-1]
    if x.shape[-1] != 2**n:
        raise ValueError(f"x has {x.shape[-1]} coefficients but v has {n} components: expected 2**{n} = {2**n}")
    if v.dim() > 2 or (v.dim() == 2 and (x.dim() < 2 or x.shape[-2] != v.shape[0])):
        raise ValueError(
            f"v must be (n,) or (P, n) with x of shape (..., P, 2**n); got v {tuple(v.shape)}, x {tuple(x.shape)}"
        )


def _vector_product(x, v, left):
    _check_vector_product(x, v)
    single = v.dim() == 1
    xt, v2, lead, d = _to_coefficient_first(x, v)
    yt = _vector_product_t(xt, v2, left)
    y = _SwapOuterAxes.apply(yt).reshape(*lead, v2.shape[0], d)
    return y.squeeze(-2) if single else y


def left_vector_product(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Geometric product v x: v (P, n) with x (..., P, 2**n), or v (n,) with x (..., 2**n)."""
    return _vector_product(x, v, True)


def right_vector_product(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Geometric product x v: v (P, n) with x (..., P, 2**n), or v (n,) with x (..., 2**n)."""
    return _vector_product(x, v, False)


def _apply_left_rotors(xt, V, W, cos, sinc):
    """R x with R = R_0 ... R_{k-1}; xt (d, P, B) layout; V, W (P, k, n); cos, sinc (P, k)."""
    for j in reversed(range(V.shape[-2])):
        v, w = V[:, j, :], W[:, j, :]
        dot = (v * w).sum(-1).unsqueeze(-1)  # (P, 1)
        # (v ^ w) x = v (w x) - (v . w) x
        turned = _vector_product_t(_vector_product_t(xt, w, True), v, True) - dot * xt
        xt = cos[:, j].unsqueeze(-1) * xt + sinc[:, j].unsqueeze(-1) * turned
    return xt


def _apply_right_reversed_rotors(xt, V, W, cos, sinc):
    """x S~ with S = S_0 ... S_{k-1}: S_j~ = cos - sinc (v ^ w), x (w ^ v) = (x w) v - (v . w) x."""
    for j in reversed(range(V.shape[-2])):
        v, w = V[:, j, :], W[:, j, :]
        dot = (v * w).sum(-1).unsqueeze(-1)
        turned = _vector_product_t(_vector_product_t(xt, w, False), v, False) - dot * xt
        xt = cos[:, j].unsqueeze(-1) * xt + sinc[:, j].unsqueeze(-1) * turned
    return xt


def compose_rotors(V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The rotor R = R_0 R_1 ... R_{k-1} as a multivector (..., 2**n) from factors (..., k, n)."""
    n = V.shape[-1]
    lead = V.shape[:-2]
    one = V.new_zeros(*lead, 2**n)
    one[..., 0] = 1
    if V.shape[-2] == 0:
        return one
    V2, W2 = V.reshape(-1, *V.shape[-2:]), W.reshape(-1, *W.shape[-2:])
    cos, sinc = simple_rotor_coefficients(V2, W2)
    onet = one.reshape(-1, 2**n).t().unsqueeze(-1)  # (d, P, 1)
    return _apply_left_rotors(onet, V2, W2, cos, sinc).squeeze(-1).t().reshape(*lead, 2**n)


def sandwich_matrix(left, right=None) -> torch.Tensor:
    """The (..., 2**n, 2**n) matrix M of x -> R x S~ (S = R when ``right`` is None): y = M x."""
    VL, WL = left
    VR, WR = (VL, WL) if right is None else right
    n = VL.shape[-1]
    index, left_sign, right_sign, reverse = _full_tables(n, VL.device, VL.dtype)
    rotor = compose_rotors(VL, WL)
    other = rotor if right is None else compose_rotors(VR, WR)
    other_reversed = other * reverse
    left_matrix = rotor[..., index] * left_sign
    right_matrix = other_reversed[..., index] * right_sign
    return left_matrix @ right_matrix


# ---------------------------------------------------------------------------------------------
# Backends and their registry.

class _SwapOuterAxes(torch.autograd.Function):
    """(a, P, b) -> (b, P, a), contiguous, with a contiguous gradient too.

    A plain permute would hand the backward pass a permuted gradient, and elementwise ops keep
    their inputs' strides, so the whole backward of the factored map would run on strided data.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(t):
        return t.permute(2, 1, 0).contiguous()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad.permute(2, 1, 0).contiguous()


def _dense_backend(x, VL, WL, VR, WR):
    right = None if VR is None else (VR, WR)
    matrix = sandwich_matrix((VL, WL), right)  # (P, d, d)
    return torch.einsum("pcd,...pd->...pc", matrix, x)


def _factored_backend(x, VL, WL, VR, WR):
    if VL.shape[-2] == 0:
        return x
    lead, (P, d) = x.shape[:-2], x.shape[-2:]
    xt = _SwapOuterAxes.apply(x.reshape(-1, P, d))  # (d, P, B): rows gathered whole
    cos_l, sinc_l = simple_rotor_coefficients(VL, WL)
    yt = _apply_left_rotors(xt, VL, WL, cos_l, sinc_l)
    if VR is None:
        VR, WR, cos_r, sinc_r = VL, WL, cos_l, sinc_l
    else:
        cos_r, sinc_r = simple_rotor_coefficients(VR, WR)
    yt = _apply_right_reversed_rotors(yt, VR, WR, cos_r, sinc_r)
    return _SwapOuterAxes.apply(yt).reshape(*lead, P, d)


@dataclass
class SandwichBackend:
    """One registry entry: ``fn(x, VL, WL, VR, WR) -> y`` or a lazy "module:function" string."""

    name: str
    fn: Callable | str
    devices: tuple[str, ...] | None
    dtypes: tuple[torch.dtype, ...]
    priority: int

    def supports(self, device: torch.device, dtype: torch.dtype) -> bool:
        device_ok = self.devices is None or torch.device(device).type in self.devices
        return device_ok and dtype in self.dtypes

    def load(self) -> Callable:
        if isinstance(self.fn, str):
            module_name, _, attribute = self.fn.partition(":")
            module = importlib.import_module(module_name)
            self.fn = getattr(module, attribute)
        return self.fn


_FLOAT_TYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_REGISTRY: dict[str, SandwichBackend] = {}
#: Modules imported (once, on the first backend lookup) so that they can register backends.
PLUGIN_MODULES = ("galinear.nn.fast",)
_PLUGIN_STATE: dict[str, str] = {}


def register_sandwich_backend(name, fn, *, devices=("cpu",), dtypes=(torch.float32, torch.float64), priority=0):
    """Add (or replace) a sandwich backend.

    Parameters
    ----------
    name : str, not "auto".
    fn : callable ``fn(x, VL, WL, VR, WR) -> y`` (x (..., P, 2**n), factors (P, k, n), VR = WR
        = None for single rotors) or a lazy ``"module:function"`` string imported on first use.
    devices : device types it supports (e.g. ("cpu", "cuda")), or None for every device.
    dtypes : dtypes it supports.
    priority : "auto" picks the supporting backend with the highest priority.
    """
    if not isinstance(name, str) or not name or name == "auto":
        raise ValueError(f"a backend name must be a non-empty string other than 'auto', got {name!r}")
    if not (callable(fn) or (isinstance(fn, str) and ":" in fn)):
        raise TypeError(f"fn must be callable or a 'module:function' string, got {fn!r}")
    _REGISTRY[name] = SandwichBackend(
        name, fn, None if devices is None else tuple(devices), tuple(dtypes), int(priority)
    )


register_sandwich_backend("dense", _dense_backend, devices=None, dtypes=_FLOAT_TYPES, priority=0)
register_sandwich_backend("factored", _factored_backend, devices=None, dtypes=_FLOAT_TYPES, priority=10)


def _load_plugins():
    for module_name in PLUGIN_MODULES:
        if module_name in _PLUGIN_STATE:
            continue
        try:
            found = importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            _PLUGIN_STATE[module_name] = "not installed"
            continue
        try:
            importlib.import_module(module_name)
            _PLUGIN_STATE[module_name] = "loaded"
        except Exception as error:  # a broken optional plugin must not break the built-in backends
            _PLUGIN_STATE[module_name] = f"failed: {type(error).__name__}: {error}"


def available_sandwich_backends(device=None, dtype=None) -> list[str]:
    """Names of the registered backends (supporting ``device``/``dtype`` when given), best first."""
    _load_plugins()
    entries = sorted(_REGISTRY.values(), key=lambda entry: -entry.priority)
    return [
        entry.name
        for entry in entries
        if (device is None or dtype is None) or entry.supports(torch.device(device), dtype)
    ]


def resolve_sandwich_backend(name: str, device, dtype) -> tuple[str, Callable]:
    """(name, fn) of backend ``name`` ("auto" = best supporting the device and dtype)."""
    if _compiling():
        entry = _REGISTRY.get(name) if name != "auto" else None
        if entry is not None and not isinstance(entry.fn, str):
            return entry.name, entry.fn
    _load_plugins()
    device = torch.device(device)
    if name == "auto":
        failures = []
        for entry in sorted(_REGISTRY.values(), key=lambda item: -item.priority):
            if not entry.supports(device, dtype):
                continue
            try:
                return entry.name, entry.load()
            except Exception as error:
                failures.append(f"{entry.name}: {error}")
        raise ValueError(f"no sandwich backend supports device {device} and dtype {dtype} ({failures})")
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(
            f"unknown sandwich backend {name!r}; registered: {sorted(_REGISTRY)} (or 'auto'); "
            f"optional modules: {_PLUGIN_STATE}"
        )
    if not entry.supports(device, dtype):
        raise ValueError(
            f"sandwich backend {name!r} does not support device {device} with dtype {dtype} "
            f"(devices {entry.devices or 'any'}, dtypes {entry.dtypes}); use backend='auto'"
        )
    return entry.name, entry.load()


def _check_factors(label, pair, P, n):
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        raise TypeError(f"{label} must be a pair (V, W) of tensors, got {type(pair).__name__}")
    V, W = pair
    k = n // 2
    for part, tensor in (("V", V), ("W", W)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{label} {part} must be a torch.Tensor")
        if tuple(tensor.shape) != (P, k, n):
            raise ValueError(
                f"{label} {part} must have shape (P, k, n) = ({P}, {k}, {n}) for x of shape "
                f"(B, {P}, {2**n}), got {tuple(tensor.shape)}"
            )


def rotor_sandwich(x: torch.Tensor, left, right=None, backend: str = "auto") -> torch.Tensor:
    """y[b, p] = R_p x[b, p] S_p~ (S = R when ``right`` is None).

    Parameters
    ----------
    x : (B, P, 2**n) multivectors (any number of leading batch axes before P).
    left, right : factor pairs (V, W), each (P, k, n), k = floor(n/2); see the module docstring.
    backend : a registered backend name or "auto".
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError("x must be a tensor of shape (B, P, 2**n)")
    d = x.shape[-1]
    n = d.bit_length() - 1
    if d < 1 or 2**n != d:
        raise ValueError(f"the last axis of x must hold 2**n coefficients, got {d}")
    P = x.shape[-2]
    _check_factors("left", left, P, n)
    if right is not None:
        _check_factors("right", right, P, n)
    _, fn = resolve_sandwich_backend(backend, x.device, x.dtype)
    VL, WL = left
    VR, WR = (None, None) if right is None else right
    return fn(x, VL, WL, VR, WR)


def fwht(x: torch.Tensor, length: int | None = None) -> torch.Tensor:
    """Orthonormal fast Walsh-Hadamard transform over the last axis.

    The last axis is cut into consecutive segments of ``length`` (a power of two dividing it;
    default the whole axis, which must then be a power of two) and each is transformed by
    H / sqrt(length), H the Sylvester-Hadamard matrix: x -> (I kron H) x / sqrt(length).
    """
    size = x.shape[-1]
    length = size if length is None else int(length)
    if length < 1 or length & (length - 1) or size % length:
        raise ValueError(f"fwht needs a power-of-two segment length dividing {size}, got {length}")
    shape = x.shape
    y = x.reshape(-1, size // length, length)
    h = 1
    while h < length:
        y = y.reshape(y.shape[0], y.shape[1], length // (2 * h), 2, h)
        a, b = y[..., 0, :], y[..., 1, :]
        y = torch.stack((a + b, a - b), dim=-2)
        h *= 2
    return (y.reshape(shape) / math.sqrt(length))
