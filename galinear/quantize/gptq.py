r"""GPTQ (Frantar, Ashkboos, Hoefler and Alistarh, 2023): weights quantized column by column, each
column's rounding error spread over the columns not yet quantized through the inverse Hessian.

For a linear layer with calibration inputs X (n, in), the layer-wise loss of a quantized weight
:math:`\hat W` is :math:`\|X \hat W^T - X W^T\|^2 = \operatorname{tr}(\Delta H \Delta^T)`, with
:math:`H = X^T X` and :math:`\Delta = \hat W - W`. Quantizing column j and compensating the
columns after it by :math:`-\delta_j\, [H^{-1}]_{j,>j} / [H^{-1}]_{jj}` (:math:`\delta_j` the column's
error divided by its pivot, computed on the upper Cholesky factor of :math:`H^{-1}`) minimises that
loss greedily. The damping adds ``damp`` times the mean of diag H to the diagonal; inputs that never
occur (a zero diagonal) get weight zero; with ``act_order`` the columns are taken in the order of
decreasing diag H. The grids are those of round-to-nearest on the whole rows
(:func:`galinear.quantize.quantizers.weight_grid`), fixed before the updates; with ``group_size`` G,
those of each run of G consecutive columns of a row, also fixed before the updates and set on the
original column order whatever the order of quantization (what GPTQ implementations call static
groups; their default sets a group's grid on the updated weights when its first column is reached).
"""
from __future__ import annotations

import torch

from galinear.quantize.quantizers import check_bits, fake_quantize, weight_grid

__all__ = ["gptq_quantize", "hessian_of", "layer_error"]


def hessian_of(x: torch.Tensor) -> torch.Tensor:
    """:math:`X^T X` in float64 for inputs ``x`` (..., in)."""
    flat = x.detach().reshape(-1, x.shape[-1]).double()
    return flat.t() @ flat


def layer_error(w_hat: torch.Tensor, w: torch.Tensor, hessian: torch.Tensor) -> float:
    """:math:`\\operatorname{tr}((\\hat W - W) H (\\hat W - W)^T)`: the squared output error on the calibration rows."""
    delta = (w_hat - w).double()
    return float(torch.einsum("oi,ij,oj->", delta, hessian.to(device=delta.device, dtype=torch.float64), delta))


def gptq_quantize(w: torch.Tensor, hessian: torch.Tensor, bits: int, symmetric: bool = True, damp: float = 0.01,
                  act_order: bool = False, block: int = 128, group_size: int | None = None) -> torch.Tensor:
    """The GPTQ-quantized (out, in) weight (float grid points, ``w``'s dtype) for ``hessian`` = X^T X;
    one grid per output channel, or per run of ``group_size`` columns of each (module doc)."""
    check_bits(bits)
    if not isinstance(damp, (int, float)) or not 0 <= damp < 1:
        raise ValueError(f"--damp: the GPTQ damping must be a number in [0, 1), got {damp!r}; 0.01 is usual")
    W = w.detach().double().clone()
    H = hessian.detach().to(device=W.device, dtype=torch.float64).clone()
    columns = W.shape[1]
    if H.shape != (columns, columns):
        raise ValueError(f"the Hessian is {tuple(H.shape)} but the weight has {columns} input columns")
    scale, zero = weight_grid(W, bits, symmetric, group_size)  # (out, 1), or (out, in) with groups
    dead = torch.diagonal(H) == 0
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    order = torch.argsort(torch.diagonal(H), descending=True) if act_order else torch.arange(columns, device=W.device)
    W, H = W[:, order], H[order][:, order]
    if group_size is not None:
        scale, zero = scale[:, order], zero[:, order]
    H += damp * torch.mean(torch.diagonal(H)) * torch.eye(columns, dtype=H.dtype, device=H.device)
    inverse = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    Q = torch.zeros_like(W)
    for start in range(0, columns, block):
        stop = min(start + block, columns)
        part = W[:, start:stop].clone()
        errors = torch.zeros_like(part)
        pivots = inverse[start:stop, start:stop]
        for j in range(stop - start):
            column = part[:, j]
            k = start + j
            grid = (scale, zero) if group_size is None else (scale[:, k:k + 1], zero[:, k:k + 1])
            q = fake_quantize(column[:, None], *grid, bits)[:, 0]
            Q[:, k] = q
            error = (column - q) / pivots[j, j]
            part[:, j:] -= error[:, None] * pivots[j, j:][None, :]
            errors[:, j] = error
        W[:, stop:] -= errors @ inverse[start:stop, stop:]
    back = torch.argsort(order)
    return Q[:, back].to(w.dtype)
