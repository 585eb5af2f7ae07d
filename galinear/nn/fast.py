r"""Fast sandwich backends: the numba rotor-chain kernels wrapped as a torch autograd Function.

The backend ``"numba"`` (CPU, float32 and float64; the rotor-factor convention of docs/nn.md) is
registered by :mod:`galinear.nn.functional` itself, lazily, as ``"galinear.nn.fast:numba_sandwich"``
with a priority above ``"factored"`` so that ``backend="auto"`` picks it on the CPU; this module
is imported on the first backend lookup and imports nothing of :mod:`galinear.nn.functional`.

Forward applies the simple rotors factor by factor (:math:`O(n^2 2^n)` per token) with one of
two kernels: ``"tile"`` (:mod:`galinear.kernels.rotor_chain`, tiles of 16-64 tokens vectorised
along tokens) or ``"resident"`` (:mod:`galinear.kernels.resident`, one token at a time, nothing
padded); ``kernel="auto"`` picks by the number of tokens with the measured cross-over
:data:`galinear.kernels.resident.RESIDENT_MAX_TOKENS`. Backward is reversible: only the output y is saved, the
input of every factor is recomputed from its output by the inverse factor, so the extra memory
of the backward pass is a few tiles per thread, whatever the number of factors.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from galinear.kernels import resident, rotor_chain

__all__ = ["numba_sandwich", "NumbaSandwich", "register"]

def _as_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().contiguous().numpy()


class NumbaSandwich(torch.autograd.Function):
    """y = R x S~ for x (B, P, 2**n) and factors (P, k, n); VR = WR = None for S = R.

    Differentiable once (the backward runs in numba); a second derivative raises an error.
    """

    @staticmethod
    def forward(ctx, x, VL, WL, VR, WR, tile, kernel="auto"):
        kernel = resident.pick_kernel(kernel, x.shape[0]) if tile is None else "tile"
        args = (_as_numpy(x), _as_numpy(VL), _as_numpy(WL),
                None if VR is None else _as_numpy(VR), None if WR is None else _as_numpy(WR))
        if kernel == "resident":
            y = resident.sandwich_forward(*args)
        else:
            y = rotor_chain.sandwich_forward(*args, tile=tile)
        out = torch.from_numpy(y)
        ctx.single = VR is None
        ctx.tile = tile
        ctx.kernel = kernel
        if ctx.single:
            ctx.save_for_backward(out, VL, WL)
        else:
            ctx.save_for_backward(out, VL, WL, VR, WR)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        saved = ctx.saved_tensors
        y, VL, WL = saved[:3]
        VR, WR = (None, None) if ctx.single else saved[3:]
        args = (_as_numpy(y), _as_numpy(grad_y.to(y.dtype)), _as_numpy(VL), _as_numpy(WL),
                None if VR is None else _as_numpy(VR), None if WR is None else _as_numpy(WR))
        if ctx.kernel == "resident":
            grads = resident.sandwich_backward(*args)
        else:
            grads = rotor_chain.sandwich_backward(*args, tile=ctx.tile)
        out = [None if g is None else torch.from_numpy(g) for g in grads]
        return out[0], out[1], out[2], out[3], out[4], None, None


# numba kernels are opaque to dynamo: under torch.compile this function runs eagerly (a graph
# break), so compiled modules work with the default "auto" backend.
@torch.compiler.disable
def numba_sandwich(x, VL, WL, VR=None, WR=None, *, tile: int | None = None, kernel: str = "auto"):
    """Backend function ``fn(x, VL, WL, VR, WR) -> y`` for factor pairs as in docs/nn.md (x (..., P, 2**n), CPU).

    ``kernel``: "auto" (by the number of tokens, see the module docstring), "resident" or
    "tile"; a ``tile`` size implies "tile". Raises ValueError for tensors off the CPU or an
    unknown kernel, TypeError for dtypes other than float32/64.
    """
    if kernel not in resident.KERNELS:
        raise ValueError(f"kernel must be one of {resident.KERNELS}, got {kernel!r}")
    tensors = [t for t in (x, VL, WL, VR, WR) if t is not None]
    for t in tensors:
        if t.device.type != "cpu":
            raise ValueError(f"the numba backend runs on the CPU only, got a tensor on {t.device}; "
                             "use backend='factored' (or 'auto') for other devices")
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
    flat = x.reshape(-1, P, d)
    y = NumbaSandwich.apply(flat, VL, WL, VR, WR, tile, kernel)
    return y.reshape(*lead, P, d)


def register() -> None:
    """(Re-)register "numba" (CPU, float32/float64) in galinear.nn.functional's backend registry.

    The registry holds it from the start; this puts the same lazy entry back (e.g. after it
    was replaced).
    """
    from galinear.nn.functional import backends

    backends._register_numba()


def __getattr__(name):
    # NUMBA_PRIORITY, the priority of "numba" in the registry, is defined once, next to the
    # registry; it is read from there on first use so that importing this module never imports
    # galinear.nn.functional.
    if name == "NUMBA_PRIORITY":
        from galinear.nn.functional.backends import NUMBA_PRIORITY

        return NUMBA_PRIORITY
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
