r"""The ``"numba"`` sandwich backend: the numba rotor-chain kernels behind a torch call (values only).

The backend (CPU, float32 and float64; the rotor-factor convention of docs/nn.md) is registered
by :mod:`galinear.nn.functional` itself, lazily, as ``"galinear.nn.numba_backend:numba_sandwich"``
with a priority below ``"factored"``: it runs only where named (``backend="numba"``), since
``"auto"`` picks ``"spinor"`` on the CPU (docs/performance.md); this module is imported on the
first backend lookup and imports nothing of :mod:`galinear.nn.functional`.

The map applies the simple rotors factor by factor (:math:`O(n^2 2^n)` per token) with one of
two kernels: ``"tile"`` (:mod:`galinear.rotor_kernels.rotor_chain`, tiles of 16-64 tokens vectorised
along tokens) or ``"resident"`` (:mod:`galinear.rotor_kernels.resident`, one token at a time, nothing
padded). A rotor layer's plan names the kernel (:attr:`galinear.nn.functional.plan.Plan.options`,
by the number of tokens with the measured cross-over of :func:`galinear.nn._kernel_rules.numba_kernel`);
a call without a plan (``kernel="auto"``) applies the same rule.

The backend computes values only. Gradients come from the callers: the exact gradient
(:func:`galinear.nn.dexp.exact_rotor_sandwich`) needs only this forward (the input gradient is
the same map with transposed factors), and :func:`galinear.nn.functional.rotor_sandwich` runs
the differentiable ``"factored"`` backend where autograd through the map is needed. A direct
call whose inputs require gradients while grad mode is on raises a ValueError.
"""
from __future__ import annotations

import numpy as np
import torch

from galinear.nn._eager import eager_under_compile
from galinear.nn._kernel_rules import NUMBA_KERNELS, numba_kernel
from galinear.rotor_kernels import resident, rotor_chain

__all__ = ["numba_sandwich"]


def _as_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().contiguous().numpy()


def _apply(x, VL, WL, VR, WR, tile, kernel):
    """y (B, P, 2**n) for x (B, P, 2**n) and factors (P, k, n); VR = WR = None for S = R."""
    if tile is not None:
        kernel = "tile"
    elif kernel == "auto":
        kernel = numba_kernel(x.shape[0])
    args = (_as_numpy(x), _as_numpy(VL), _as_numpy(WL),
            None if VR is None else _as_numpy(VR), None if WR is None else _as_numpy(WR))
    if kernel == "resident":
        return torch.from_numpy(resident.sandwich_forward(*args))
    return torch.from_numpy(rotor_chain.sandwich_forward(*args, tile=tile))


# numba kernels are opaque to dynamo: under torch.compile this function runs eagerly (a graph
# break), so compiled modules work with the default "auto" backend.
@eager_under_compile
def numba_sandwich(x, VL, WL, VR=None, WR=None, *, tile: int | None = None, kernel: str = "auto"):
    """Backend function ``fn(x, VL, WL, VR, WR) -> y`` for factor pairs as in docs/nn.md (x (..., P, 2**n), CPU).

    ``kernel``: "resident" or "tile" (a plan's choice), or "auto" (a call without a plan: by the
    number of tokens, see the module docstring); a ``tile`` size implies "tile". The result carries no autograd history. Raises
    ValueError for tensors off the CPU, an unknown kernel, or inputs that require gradients
    while grad mode is on; TypeError for dtypes other than float32/64.
    """
    if kernel != "auto" and kernel not in NUMBA_KERNELS:
        raise ValueError(f"kernel must be one of {('auto', *NUMBA_KERNELS)}, got {kernel!r}")
    tensors = [t for t in (x, VL, WL, VR, WR) if t is not None]
    for t in tensors:
        if t.device.type != "cpu":
            raise ValueError(f"the numba backend runs on the CPU only, got a tensor on {t.device}; "
                             "use backend='factored' (or 'auto') for other devices")
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise ValueError("the numba backend computes values only, and these inputs require gradients: "
                         "call galinear.nn.functional.rotor_sandwich (it runs the differentiable "
                         "'factored' backend when autograd is needed), use backend='factored', or "
                         "run under torch.no_grad()")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"the numba backend supports float32 and float64, got {x.dtype}; "
                        "use backend='factored' or cast x")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., P, 2**n), got {tuple(x.shape)}")
    dtype = x.dtype
    VL, WL = VL.to(dtype), WL.to(dtype)
    if VR is not None:
        VR, WR = VR.to(dtype), WR.to(dtype)
    lead = x.shape[:-2]
    P, d = x.shape[-2:]
    y = _apply(x.reshape(-1, P, d), VL, WL, VR, WR, tile, kernel)
    return y.reshape(*lead, P, d)


#: the options of :attr:`galinear.nn.functional.plan.Plan.options` this backend takes
numba_sandwich.plan_options = ("kernel",)
