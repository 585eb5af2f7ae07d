r"""The exact derivative of the rotor exponential, and rotor maps whose gradient uses it.

A rotor layer computes :math:`y = R\,x\,\tilde S` with :math:`R = \exp(B)`, :math:`S = \exp(C)`
for bivectors B, C of Euclidean Cl(n). The exponential is smooth everywhere (at B = 0 and at
equal angles too), so its gradient is well defined even where the planes of the invariant
decomposition are not. This module computes it exactly, without differentiating the
decomposition (derivation in docs/nn.md, section "The exact gradient"; proof in
``proofs/dexp.py``):

.. math::

    \frac{\partial L}{\partial B} = \varphi(\mathrm{ad}_B)\Big(\sum_t \langle G_t \tilde y_t\rangle_2\Big),
    \qquad
    \frac{\partial L}{\partial C} = -\varphi(\mathrm{ad}_C)\Big(\sum_t \langle \tilde y_t G_t\rangle_2\Big),
    \qquad \varphi(z) = \frac{1 - e^{-z}}{z},

with :math:`G_t = \partial L / \partial y_t`, :math:`\mathrm{ad}_B H = BH - HB` on bivectors, and
:math:`\langle\cdot\rangle_2` the bivector part. :math:`\mathrm{ad}_B` acts on the skew matrix
of H as :math:`X \mapsto 2(AX - XA)` (A the skew matrix of B), so in the eigenbasis of the
Hermitian matrix :math:`iA = U \mathrm{diag}(\mu) U^H` it scales entry (a, b) by
:math:`\varphi(2i(\mu_b - \mu_a))`. :math:`\varphi(iy) = \mathrm{sinc}(y) - i(1 - \cos y)/y` is
entire, so the formula is finite and smooth at equal angles and at zero: no divided difference
has to be guarded.

The backward pass needs only the output y (the map is orthogonal, so the input gradient is the
transposed map of G, applied by the same backend with the reversed factors) and the bivector
parts above: :math:`O(n^2 2^n)` per token and chunk pair, plus :math:`O(n^3)` per rotor.
"""
from __future__ import annotations

import numpy as np
import torch

from galinear.blades import bivector_part_tables, bivector_pairs

__all__ = [
    "phi_ad",
    "psi_ad",
    "bivector_parts",
    "rotor_exp",
    "exact_rotor_sandwich",
    "transposed_factors",
]

_HALF_TYPES = (torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------------------------
# Functions of ad_B through the eigen-decomposition of the skew matrix.

def _pair_rows_cols(n: int, device):
    pairs = np.array(bivector_pairs(n), dtype=np.int64)
    return torch.as_tensor(pairs[:, 0], device=device), torch.as_tensor(pairs[:, 1], device=device)


def _skew(bivector: torch.Tensor, n: int) -> torch.Tensor:
    rows, cols = _pair_rows_cols(n, bivector.device)
    out = bivector.new_zeros(*bivector.shape[:-1], n, n)
    out[..., rows, cols] = bivector
    out[..., cols, rows] = -bivector
    return out


def _unskew(matrix: torch.Tensor, n: int) -> torch.Tensor:
    rows, cols = _pair_rows_cols(n, matrix.device)
    return matrix[..., rows, cols]


def _dimension(m: int) -> int:
    n = int(round((1 + (1 + 8 * m) ** 0.5) / 2))
    if n * (n - 1) // 2 != m or n < 2:
        raise ValueError(f"a bivector's last axis must hold C(n, 2) coefficients (1, 3, 6, 10, ...), got {m}")
    return n


def _ad_function(bivector: torch.Tensor, value: torch.Tensor, sign: float) -> torch.Tensor:
    r"""f(ad_B) applied to the bivectors ``value`` for f = phi (sign=+1) or psi (sign=-1).

    phi(z) = (1 - e^{-z}) / z, psi(z) = phi(-z) = (e^z - 1) / z. Computed in float64 (complex128)
    whatever the input dtype, then cast back.
    """
    m = bivector.shape[-1]
    if value.shape[-1] != m:
        raise ValueError(f"bivector and value must both hold C(n, 2) = {m} coefficients, got {value.shape[-1]}")
    if m == 0:
        return value.clone()
    n = _dimension(m)
    dtype = value.dtype
    B = _skew(bivector.detach().to(torch.float64), n)
    X = _skew(value.detach().to(torch.float64), n)
    B, X = torch.broadcast_tensors(B, X)
    mu, U = torch.linalg.eigh(1j * B.to(torch.complex128))  # iA = U diag(mu) U^H, mu real
    y = 2.0 * (mu.unsqueeze(-2) - mu.unsqueeze(-1))           # z_ab = 2 (lambda_a - lambda_b) = i y_ab
    y = sign * y                                               # psi(iy) = phi(-iy)
    sinc = torch.sinc(y / torch.pi)                            # sin(y) / y, 1 at y = 0
    half = y / 2
    one_minus_cos_over_y = torch.sin(half) * torch.sinc(half / torch.pi)  # (1 - cos y) / y
    factor = torch.complex(sinc, -one_minus_cos_over_y)        # phi(iy)
    Uh = U.mH
    rotated = Uh @ X.to(torch.complex128) @ U
    result = (U @ (factor * rotated) @ Uh).real
    return _unskew(result, n).to(dtype)


def phi_ad(bivector: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    r""":math:`\varphi(\mathrm{ad}_B)(H)`, :math:`\varphi(z) = (1 - e^{-z})/z`, batched over leading axes.

    The right-trivialised derivative of the exponential: :math:`\frac{d}{dt}\exp(B + tH)|_{0}
    = \varphi(-\mathrm{ad}_B)(H)\,\exp(B)`... see :func:`psi_ad`; this one maps the
    right-trivialised gradient of a loss to its gradient in B. Not differentiable (it is a
    backward-pass formula).
    """
    return _ad_function(bivector, value, 1.0)


def psi_ad(bivector: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    r""":math:`\psi(\mathrm{ad}_B)(H)`, :math:`\psi(z) = (e^{z} - 1)/z`: maps the left-trivialised
    gradient :math:`\langle \tilde R\, \partial L/\partial R\rangle_2` to :math:`\partial L/\partial B`."""
    return _ad_function(bivector, value, -1.0)


# ---------------------------------------------------------------------------------------------
# Bivector parts of products of two multivectors.

_TORCH_TABLES: dict = {}


def _torch_part_tables(n, device, dtype):
    key = (n, str(device), dtype)
    tables = _TORCH_TABLES.get(key)
    if tables is None:
        gather, left, right = bivector_part_tables(n)
        tables = (
            torch.as_tensor(np.array(gather, dtype=np.int64), device=device),
            torch.as_tensor(np.stack([left, right], axis=-1).astype(np.float64), device=device).to(dtype),
        )
        _TORCH_TABLES[key] = tables
    return tables


#: Up to this many coefficients per multivector the bivector parts go through one batched
#: matrix product per chunk pair (T d^2 multiply-adds, at matrix-product speed); above it, one
#: gather-multiply-sum per bivector blade (T d C(n, 2), memory-bound).
CORRELATION_LIMIT = 256


def _numba_parts_usable(a: torch.Tensor) -> bool:
    """The numba kernel serves float32/float64 CPU tensors when numba compiles (under
    NUMBA_DISABLE_JIT its loops would run as plain Python: the torch path is faster then)."""
    if a.dtype not in (torch.float32, torch.float64):
        return False
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a dependency
        return False
    return not config.DISABLE_JIT


def bivector_parts(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    r"""Summed bivector parts :math:`\sum_t \langle a_t \tilde b_t\rangle_2` and
    :math:`\sum_t \langle \tilde b_t a_t\rangle_2` for a, b of shape (T, P, 2**n): each (P, C(n, 2)).

    ``kernel``: "torch" (one batched matrix product per chunk pair up to
    :data:`CORRELATION_LIMIT` coefficients, one gather pass per blade above), "numba"
    (:mod:`galinear.kernels.bivector_parts`: every blade from one resident pass, CPU only) or
    "auto" (numba above the limit on the CPU when it compiles, torch otherwise).
    """
    if kernel not in ("auto", "torch", "numba"):
        raise ValueError(f"kernel must be 'auto', 'torch' or 'numba', got {kernel!r}")
    if a.shape != b.shape or a.dim() != 3:
        raise ValueError(f"a and b must both be (T, P, 2**n), got {tuple(a.shape)} and {tuple(b.shape)}")
    d = a.shape[-1]
    n = d.bit_length() - 1
    gather, signs = _torch_part_tables(n, a.device, a.dtype)
    M = gather.shape[0]
    P = a.shape[1]
    if M == 0:
        empty = a.new_zeros(P, 0)
        return empty, empty
    use_numba = kernel == "numba" or (kernel == "auto" and d > CORRELATION_LIMIT and a.device.type == "cpu"
                                       and _numba_parts_usable(a))
    if use_numba:
        if a.device.type != "cpu":
            raise ValueError(f"kernel='numba' runs on the CPU only, got tensors on {a.device}; use kernel='torch'")
        from galinear.kernels.bivector_parts import bivector_parts as numba_parts

        left, right = numba_parts(a.detach().contiguous().numpy(), b.detach().to(a.dtype).contiguous().numpy())
        return torch.from_numpy(left), torch.from_numpy(right)
    if d <= CORRELATION_LIMIT:
        # corr[p, i, c] = sum_t a[t, p, i] b[t, p, c]; the part of blade m picks i = gather[m, c]
        corr = torch.bmm(a.permute(1, 2, 0), b.permute(1, 0, 2))
        columns = torch.arange(d, device=a.device)
        picked = corr[:, gather, columns]  # (P, M, d)
        parts = torch.einsum("pmd,mds->spm", picked, signs)
    else:
        at = a.permute(2, 1, 0).contiguous()  # (d, P, T): rows gathered whole
        bt = b.permute(2, 1, 0).contiguous()
        sums = torch.empty(M, d, P, dtype=a.dtype, device=a.device)
        for m in range(M):
            sums[m] = (at.index_select(0, gather[m]) * bt).sum(-1)
        parts = torch.einsum("mdp,mds->spm", sums, signs)  # (2, P, M)
    return parts[0], parts[1]


# ---------------------------------------------------------------------------------------------
# Rotors with the exact gradient.

def transposed_factors(V: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Factors of the reverse R~ = R_{k-1}~ ... R_0~ of R = R_0 ... R_{k-1}: order flipped,
    v and w swapped (w ^ v = -(v ^ w))."""
    return W.flip(-2), V.flip(-2)


class _RotorExp(torch.autograd.Function):
    """R = exp(B) as a multivector from precomputed exact factors; backward through psi(ad_B)."""

    @staticmethod
    def forward(ctx, bivector, V, W, compose):
        rotor = compose(V, W)
        ctx.save_for_backward(bivector, rotor)
        return rotor

    @staticmethod
    def backward(ctx, grad):
        bivector, rotor = ctx.saved_tensors
        d = rotor.shape[-1]
        n = d.bit_length() - 1
        # left-trivialised gradient <R~ G>_2 = <G~ R>_2 reversed... computed as the bivector part
        # of a b~ with a = G, b = R: <G R~>_2 is the right-trivialised one; use <R~ G>_2 directly.
        flat_g = grad.reshape(1, -1, d)
        flat_r = rotor.reshape(1, -1, d)
        _, left_trivial = bivector_parts(flat_g, flat_r)  # <R~ G>_2
        left_trivial = left_trivial.reshape(*bivector.shape).to(bivector.dtype)
        return psi_ad(bivector, left_trivial), None, None, None


def rotor_exp(bivector: torch.Tensor, factors=None) -> torch.Tensor:
    r"""exp(B) as a multivector (..., 2**n), differentiable with the exact gradient.

    ``factors``: an exact decomposition (V, W) of ``bivector`` (default: computed with
    :func:`galinear.nn.functional.invariant_decomposition`, method "exact", without gradients).
    """
    from galinear.nn import functional as F

    if factors is None:
        with torch.no_grad():
            result = F.invariant_decomposition(bivector.detach(), method="exact")
        factors = (result.V, result.W)
    V, W = factors
    return _RotorExp.apply(bivector, V.detach(), W.detach(), F.compose_rotors)


class _ExactSandwich(torch.autograd.Function):
    """y = R x S~ (S = R when the right bivectors are None) with the exact gradient in B and C.

    The factors must be an exact decomposition of the bivectors (orthogonal planes to working
    precision); they are constants here: the gradient is that of exp, not of the decomposition.
    """

    @staticmethod
    def forward(ctx, x, left_bivectors, right_bivectors, VL, WL, VR, WR, fn):
        y = fn(x, VL, WL, VR, WR)
        ctx.fn = fn
        ctx.single = right_bivectors is None
        if ctx.single:
            ctx.save_for_backward(y, left_bivectors, VL, WL)
        else:
            ctx.save_for_backward(y, left_bivectors, right_bivectors, VL, WL, VR, WR)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        saved = ctx.saved_tensors
        if ctx.single:
            y, BL, VL, WL = saved
            BR = VR = WR = None
        else:
            y, BL, BR, VL, WL, VR, WR = saved
        grad_y = grad_y.contiguous()
        grad_x = grad_l = grad_r = None
        if ctx.needs_input_grad[0]:
            # The transposed map y -> R~ y S: left rotor R~, right rotor S~ (whose reverse is S).
            TL = transposed_factors(VL, WL)
            TR = (None, None) if ctx.single else transposed_factors(VR, WR)
            if ctx.single:
                TR = TL
            grad_x = ctx.fn(grad_y, TL[0], TL[1], TR[0], TR[1])
        if ctx.needs_input_grad[1] or (not ctx.single and ctx.needs_input_grad[2]):
            d = y.shape[-1]
            P = y.shape[-2]
            flat_y = y.reshape(-1, P, d)
            flat_g = grad_y.reshape(-1, P, d).to(y.dtype)
            left_part, right_part = bivector_parts(flat_g, flat_y)  # <G y~>_2, <y~ G>_2
            if ctx.single:
                grad_l = phi_ad(BL, (left_part - right_part).to(BL.dtype))
            else:
                grad_l = phi_ad(BL, left_part.to(BL.dtype))
                grad_r = -phi_ad(BR, right_part.to(BR.dtype))
        return grad_x, grad_l, grad_r, None, None, None, None, None


def exact_rotor_sandwich(x, left_bivectors, right_bivectors, left, right=None, backend: str = "auto"):
    r"""y[b, p] = R_p x[b, p] S_p~ with R = exp(B), S = exp(C), and the exact gradient in B, C.

    Parameters
    ----------
    x : (..., P, 2**n).
    left_bivectors, right_bivectors : (P, C(n, 2)); ``right_bivectors=None`` for S = R.
    left, right : exact factor pairs (V, W) of the bivectors (``right`` None for S = R), e.g.
        from :func:`galinear.nn.functional.invariant_decomposition`; treated as constants.
    backend : the sandwich backend that applies the factors (forward and transposed map).
    """
    from galinear.nn import functional as F

    if (right_bivectors is None) != (right is None):
        raise ValueError("give right_bivectors and right factors together (both None for S = R)")
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError("x must be a tensor of shape (..., P, 2**n)")
    d = x.shape[-1]
    n = d.bit_length() - 1
    if 2**n != d:
        raise ValueError(f"the last axis of x must hold 2**n coefficients, got {d}")
    P = x.shape[-2]
    F._check_factors("left", left, P, n)
    if right is not None:
        F._check_factors("right", right, P, n)
    _, fn = F.resolve_sandwich_backend(backend, x.device, x.dtype)
    VL, WL = (t.detach() for t in left)
    VR, WR = (None, None) if right is None else (t.detach() for t in right)
    lead = x.shape[:-2]
    flat = x.reshape(-1, P, d)
    y = _ExactSandwich.apply(flat, left_bivectors, right_bivectors, VL, WL, VR, WR, fn)
    return y.reshape(*lead, P, d)
