"""Sandwich maps x -> R x S~ from factor pairs: :func:`rotor_sandwich` runs the backend that
:func:`galinear.nn.functional.plan.plan` chooses from the registry of
:mod:`galinear.nn.functional.backends`, with the caller's intra-op thread count (the plan of a bare call leaves it as it is)."""
from __future__ import annotations

import math
from typing import Callable

import torch

from galinear.nn.functional import backends
from galinear.nn.functional import plan as dispatch

__all__ = ["resolve_sandwich_backend", "rotor_sandwich"]

#: Rotor maps as products of small complex (or real) matrices through the matrix representation
#: of Cl(n): two GEMMs per token block, with the transforms the plan names (:func:`dispatch.spinor_transform`).
#: Registered here, above the dispatcher that the spinor module asks.
backends.register_sandwich_backend(
    "spinor", "galinear.nn.functional.spinor:spinor_sandwich", devices=("cpu", "cuda"),
    dtypes=(torch.float32, torch.float64), priority=15,
)


def resolve_sandwich_backend(name: str, device, dtype) -> tuple[str, Callable]:
    """(name, fn) of backend ``name`` for the device and dtype; "auto" is what
    :func:`galinear.nn.functional.plan.auto_backend` chooses (the plan's rule for chunks above the
    matrix limit). A helper for callers that want a backend's function itself: the rotor layers
    and :func:`rotor_sandwich` run what :func:`galinear.nn.functional.plan.plan` returns."""
    if name == "auto":
        name = dispatch.auto_backend(torch.device(device), dtype)
    return name, dispatch.resolve_backend(name, torch.device(device), dtype)


def _needs_autograd(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def rotor_sandwich(x: torch.Tensor, left, right=None, backend: str = "auto") -> torch.Tensor:
    """y[b, p] = R_p x[b, p] S_p~ (S = R when ``right`` is None), differentiable in x and the factors.

    Parameters
    ----------
    x : (B, P, 2**n) multivectors (any number of leading batch axes before P).
    left, right : factor pairs (V, W), each (P, k, n), k = floor(n/2); see the module docstring.
    backend : a registered backend name or "auto".

    Notes
    -----
    The backend that runs is the one of :func:`galinear.nn.functional.plan.plan` with
    ``sandwich=True``: "auto" means what it means for
    :class:`~galinear.nn.RotorLinear` (the chunk matrices, ``"dense"``, for small n, else
    ``"spinor"`` on the CPU and CUDA). When x or a factor requires gradients (and grad mode is on),
    a backend that computes values only (e.g. "numba", "spinor") is replaced by "factored", whose
    torch operations autograd differentiates: the result equals the requested backend's to
    rounding. Without gradients the requested backend runs.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError("x must be a tensor of shape (B, P, 2**n)")
    d = x.shape[-1]
    n = d.bit_length() - 1
    if d < 1 or 2**n != d:
        raise ValueError(f"the last axis of x must hold 2**n coefficients, got {d}")
    P = x.shape[-2]
    backends._check_factors("left", left, P, n)
    if right is not None:
        backends._check_factors("right", right, P, n)
    VL, WL = left
    VR, WR = (None, None) if right is None else right
    mode = "training" if _needs_autograd(x, VL, WL, VR, WR) else "inference"
    tokens = math.prod(x.shape[:-2])
    chosen = dispatch.plan(n, tokens, x.device, x.dtype, mode, backend=backend, sandwich=True)
    return chosen.function(x.device, x.dtype)(x, VL, WL, VR, WR)
