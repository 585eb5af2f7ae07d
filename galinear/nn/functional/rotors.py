r"""Simple rotors in torch: factor pairs (V, W) -> cos/sinc coefficients, rotors, sandwich matrices.

The exponential of a simple bivector (series near 0), the products of a multivector with vectors
(signed permutations of the coefficients), and the composition of the simple rotors; see
:mod:`galinear.nn.functional` for the conventions.
"""
from __future__ import annotations

import numpy as np
import torch

from galinear._generated import rotor_spec
from galinear.blades import bivector_pairs, shortlex_bitmasks
from galinear.nn import _tables
from galinear.nn.functional._common import _HALF_TYPES, _wrapped, cached_table
from galinear.nn.functional.decomposition import _dimension_from_bivectors, wedge


#: |b|**2 below which :func:`exp_simple` uses its series (float64 switch of the rotor specification).
SERIES_LIMIT = rotor_spec.SERIES_SWITCH["float64"]


def _cos_sinc_of_square(square: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(t) and sin(t)/t as functions of s = t**2 >= 0: analytic, so finite gradients at 0.

    Below the switch point of the rotor spec (per dtype) its Taylor series in s, above it
    sqrt/cos/sin (:mod:`galinear._generated.rotor_spec`).
    """
    key = "float64" if square.dtype == torch.float64 else "float32"
    switch = rotor_spec.SERIES_SWITCH[key]
    small = square < switch
    s = torch.where(small, square, torch.zeros_like(square))
    cos_series = rotor_spec.horner(rotor_spec.COS_SERIES[key], s)
    sinc_series = rotor_spec.horner(rotor_spec.SINC_SERIES[key], s)
    t = torch.sqrt(torch.where(small, torch.full_like(square, switch), square))
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
    square = rotor_spec.wedge_square(vv, ww, vw).clamp_min(0)
    cos, sinc = _cos_sinc_of_square(square)
    return cos.to(dtype), sinc.to(dtype)


def simple_rtol(dtype: torch.dtype) -> float:
    """The rotor spec's simplicity tolerance ``SIMPLE_RTOL`` (about sqrt(eps)) of a dtype; for
    dtypes outside the spec (float16, bfloat16) sqrt(eps) of the dtype itself."""
    if dtype in (torch.float32, torch.float64):
        return rotor_spec.SIMPLE_RTOL[str(dtype).removeprefix("torch.")]
    return float(torch.finfo(dtype).eps) ** 0.5


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
    :math:`|b \wedge b| >` :func:`simple_rtol` :math:`|b|^2` (the rotor spec's ``SIMPLE_RTOL``) raises ValueError (for any bivector use
    :func:`galinear.nn.dexp.rotor_exp`, or decompose first with :func:`invariant_decomposition`).
    """
    n = _dimension_from_bivectors(bivector.shape[-1])
    if check and n >= 4:
        with torch.no_grad():
            size = (bivector.detach() * bivector.detach()).sum(-1)
            wedge_norm = _wedge_square_norm(bivector.detach(), n)
            bound = simple_rtol(bivector.dtype) * size
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


# ---------------------------------------------------------------------------------------------
# Products with vectors: n signed permutations of the coefficients.

@cached_table
def _vector_tables(n: int, device, dtype):
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
    return tables


@cached_table
def _full_tables(n: int, device, dtype):
    index, left, right = _tables.full_tables(n)
    tables = (
        torch.as_tensor(np.array(index, dtype=np.int64), device=device),
        torch.as_tensor(left.astype(np.float64), device=device).to(dtype),
        torch.as_tensor(right.astype(np.float64), device=device).to(dtype),
        torch.as_tensor(_tables.reverse_signs(n).astype(np.float64), device=device).to(dtype),
    )
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
            reuse = not (_wrapped(x) or _wrapped(grad))
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


def _permutation_sum(x, v, gather, sign):
    """sum_i (v[:, i] * sign[i]) * x[gather[i]] in the (d, P, B) layout.

    Fresh multi-megabyte tensors cost page faults on every first touch, so the gathered rows go
    through one reused buffer and the sum accumulates in place (outside functorch transforms,
    which need the out-of-place form).
    """
    n = sign.shape[0]
    coefficient = v.t().unsqueeze(1) * sign.unsqueeze(-1)  # (n, d, P)
    out = x.index_select(0, gather[0]) * coefficient[0].unsqueeze(-1)
    if _wrapped(x) or _wrapped(v):
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
    n = int(v.shape[-1])
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


@cached_table
def _bivector_left_tables(n: int, device, dtype):
    """(gather (M, 2**n) long, sign (M, 2**n)) of the left products by the bivector blades
    (:func:`galinear.blades.bivector_pairs` order): (e_m x)[r] = sign[m, r] x[gather[m, r]]."""
    index, left, _, _ = _full_tables(n, "cpu", torch.float64)
    masks = list(shortlex_bitmasks(n))
    pairs = np.asarray(bivector_pairs(n), dtype=np.int64).reshape(-1, 2)
    blades = torch.tensor([masks.index((1 << int(a)) | (1 << int(b))) for a, b in pairs], dtype=torch.int64)
    gather = torch.empty(len(blades), 2**n, dtype=torch.int64)
    for m, blade in enumerate(blades):
        gather[m] = (index == blade).to(torch.int64).argmax(-1)  # the one column per row that holds the blade
    sign = torch.gather(left, 1, gather.t()).t() if len(blades) else left.new_zeros(0, 2**n)
    return gather.to(device), sign.to(device=device, dtype=dtype)


def compose_rotors(V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    r"""The rotor R = R_0 R_1 ... R_{k-1} as a multivector (..., 2**n) from factors (..., k, n).

    Built from the right, :math:`x \leftarrow \cos\theta_j\, x + \mathrm{sinc}\,\theta_j\, b_j x`
    with :math:`b_j = v_j \wedge w_j`, each left product by a bivector one gather of the C(n, 2)
    signed permutations of x and one batched product with b_j's coefficients (differentiable).
    """
    n = int(V.shape[-1])
    lead = V.shape[:-2]
    one = V.new_zeros(*lead, 2**n)
    one[..., 0] = 1
    if V.shape[-2] == 0 or n < 2:
        return one
    V2, W2 = V.reshape(-1, *V.shape[-2:]), W.reshape(-1, *W.shape[-2:])
    P, d = V2.shape[0], 2**n
    gather, sign = _bivector_left_tables(n, V.device, V.dtype)
    M = gather.shape[0]
    flat = gather.reshape(-1)
    cos, sinc = simple_rotor_coefficients(V2, W2)
    bivectors = wedge(V2, W2) * sinc.unsqueeze(-1)     # (P, k, M): sinc_j b_j
    x = one.reshape(P, d)
    for j in reversed(range(V2.shape[-2])):
        moved = x.index_select(1, flat).view(P, M, d) * sign
        x = cos[:, j, None] * x + torch.bmm(bivectors[:, j].unsqueeze(1), moved).squeeze(1)
    return x.reshape(*lead, d)


def sandwich_matrix(left, right=None) -> torch.Tensor:
    """The (..., 2**n, 2**n) matrix M of x -> R x S~ (S = R when ``right`` is None): y = M x."""
    VL, WL = left
    VR, WR = (VL, WL) if right is None else right
    n = int(VL.shape[-1])
    index, left_sign, right_sign, reverse = _full_tables(n, VL.device, VL.dtype)
    rotor = compose_rotors(VL, WL)
    other = rotor if right is None else compose_rotors(VR, WR)
    other_reversed = other * reverse
    left_matrix = rotor[..., index] * left_sign
    right_matrix = other_reversed[..., index] * right_sign
    return left_matrix @ right_matrix
