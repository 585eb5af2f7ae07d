"""Independent torch references for rotor sandwich maps, built from galinear.blades only.

``dense_map_matrix``: the literal rotor-factor convention of docs/nn.md (R_j = cos t + sin t / t (v ^ w) as a multivector,
R = R_0 ... R_{k-1}, y = R x S~) turned into the 2**n x 2**n matrix through the Cayley tables;
for small n. ``permutation_sandwich``: the same map applied with signed permutations (products
with basis vectors), for any n. Both are differentiable in x, V, W (float64 autograd).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from galinear.blades import (
    bitmask_to_shortlex,
    blade_grades,
    blade_product_sign,
    cayley_tables,
    shortlex_bitmasks,
)


def simple_factor_scalars(V, W):
    """(cos theta, sin theta / theta, b) with b the bivector coefficients in bivector_pairs order."""
    n = V.shape[-1]
    iu, ju = np.triu_indices(n, 1)
    b = V[..., iu] * W[..., ju] - V[..., ju] * W[..., iu]
    theta = torch.sqrt((b * b).sum(-1))
    return torch.cos(theta), torch.sin(theta) / theta, b


def rotor_multivector(V, W):
    """R = prod_j (cos t_j + sin t_j / t_j b_j), shape (..., 2**n) in shortlex order."""
    n = V.shape[-1]
    D = 1 << n
    index, sign = cayley_tables(n)
    index = torch.as_tensor(np.array(index))
    sign = torch.as_tensor(np.array(sign), dtype=V.dtype)
    grades = blade_grades(n)
    biv_pos = np.nonzero(grades == 2)[0]
    cos, sinc, b = simple_factor_scalars(V, W)
    R = torch.zeros(V.shape[:-2] + (D,), dtype=V.dtype)
    R[..., 0] = 1.0
    for j in range(V.shape[-2]):
        F = torch.zeros(V.shape[:-2] + (D,), dtype=V.dtype)
        F[..., 0] = cos[..., j]
        F[..., biv_pos] = sinc[..., j, None] * b[..., j, :]
        R = geometric_product_cayley(R, F, index, sign)
    return R


def geometric_product_cayley(a, b, index, sign):
    """(a b)[index[i, j]] += sign[i, j] a[i] b[j] with the Cayley tables."""
    prod = (a[..., :, None] * b[..., None, :]) * sign
    out = torch.zeros_like(a)
    flat_idx = index.reshape(-1).expand(prod.shape[:-2] + (index.numel(),))
    return out.scatter_add(-1, flat_idx, prod.reshape(prod.shape[:-2] + (-1,)))


def reverse_signs(n, dtype):
    g = blade_grades(n)
    return torch.as_tensor(np.where((g * (g - 1) // 2) % 2 == 1, -1.0, 1.0), dtype=dtype)


def dense_map_matrix(VL, WL, VR=None, WR=None):
    """The (P, 2**n, 2**n) matrices M with y = M x = R x S~ (S = R if VR is None)."""
    n = VL.shape[-1]
    D = 1 << n
    index, sign = cayley_tables(n)
    index_t = torch.as_tensor(np.array(index))
    sign_t = torch.as_tensor(np.array(sign), dtype=VL.dtype)
    R = rotor_multivector(VL, WL)
    S = R if VR is None else rotor_multivector(VR, WR)
    S_rev = S * reverse_signs(n, VL.dtype)
    eye = torch.eye(D, dtype=VL.dtype)
    cols = []
    for c in range(D):
        e = eye[c].expand(R.shape[:-1] + (D,))
        cols.append(geometric_product_cayley(geometric_product_cayley(R, e, index_t, sign_t),
                                             S_rev, index_t, sign_t))
    return torch.stack(cols, dim=-1)


def dense_sandwich(x, VL, WL, VR=None, WR=None):
    M = dense_map_matrix(VL, WL, VR, WR)
    return torch.einsum("pij,bpj->bpi", M, x)


@lru_cache(maxsize=None)
def _vector_tables(n):
    """For every basis vector e_i: source index and sign so (e_i z)[r] = sl[i, r] z[src[i, r]]."""
    masks = shortlex_bitmasks(n)
    pos = bitmask_to_shortlex(n)
    D = 1 << n
    src = np.empty((n, D), dtype=np.int64)
    sl = np.empty((n, D))
    sr = np.empty((n, D))
    metric = (1,) * n
    for i in range(n):
        for c in range(D):
            m = int(masks[c])
            r = int(pos[m ^ (1 << i)])
            src[i, r] = c
            sl[i, r] = blade_product_sign(1 << i, m, metric)
            sr[i, r] = blade_product_sign(m, 1 << i, metric)
    return torch.as_tensor(src), torch.as_tensor(sl), torch.as_tensor(sr)


def _vector_product(z, vec, right):
    """vec z (right=False) or z vec (right=True); z (B, P, D), vec (P, n)."""
    n = vec.shape[-1]
    src, sl, sr = _vector_tables(n)
    signs = (sr if right else sl).to(z.dtype)
    out = 0
    for i in range(n):
        out = out + vec[None, :, i, None] * signs[i] * z[..., src[i]]
    return out


def permutation_sandwich(x, VL, WL, VR=None, WR=None):
    """y = R x S~ by products with vectors: R_j z = cos z + sinc (v (w z) - (v.w) z)."""
    if VR is None:
        VR, WR = VL, WL
    k = VL.shape[-2]
    z = x
    cl, sl, _ = simple_factor_scalars(VL, WL)
    cr, sr, _ = simple_factor_scalars(VR, WR)
    for j in range(k - 1, -1, -1):
        v, w = VL[:, j], WL[:, j]
        vw = (v * w).sum(-1)[None, :, None]
        bz = _vector_product(_vector_product(z, w, False), v, False) - vw * z
        z = cl[None, :, j, None] * z + sl[None, :, j, None] * bz
    for j in range(k - 1, -1, -1):
        v, w = VR[:, j], WR[:, j]
        vw = (v * w).sum(-1)[None, :, None]
        # reverse of v ^ w is w ^ v = -(v ^ w): z (w ^ v) = (z w) v - (v.w) z
        zb = _vector_product(_vector_product(z, w, True), v, True) - vw * z
        z = cr[None, :, j, None] * z + sr[None, :, j, None] * zb
    return z
