"""Checks shared by the torch layers: their constructor arguments, their inputs and their values.

Each raises a TypeError or ValueError that names the problem and the fix, before any work is done.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear._limits import check_memory

__all__ = ["check_finite"]


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_float_dtype(owner, dtype):
    """``dtype`` must be None (torch's default) or a real floating-point torch dtype."""
    if dtype is None:
        return
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{owner}: dtype must be a torch dtype such as torch.float32, got {dtype!r}")
    if not dtype.is_floating_point:
        raise TypeError(
            f"{owner}: dtype={dtype} is not a real floating-point type; the weights are trained, so "
            "use torch.float32 (the default) or torch.float64, and convert the inputs instead"
        )


def _check_allocation(owner, values, dtype, device, index_bytes=0, fix=""):
    """Refuse before allocating ``values`` weights of ``dtype`` (+ index bytes) beyond free memory."""
    itemsize = (dtype or torch.get_default_dtype()).itemsize
    check_memory(f"{owner} (parameters and buffers)", values * itemsize + index_bytes, device, fix)


def _check_input(module, x):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{type(module).__name__} expects a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{type(module).__name__} expects a floating-point input, got dtype {x.dtype}; convert it "
            "first, e.g. x.float()"
        )
    if x.dim() == 0 or x.shape[-1] != module.in_features:
        raise ValueError(
            f"{type(module).__name__}: the last dimension of the input must be in_features="
            f"{module.in_features}, got shape {tuple(x.shape)}; reshape the input or build the layer "
            f"with in_features={x.shape[-1] if x.dim() else '?'}"
        )


def _is_power_of_two(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1 and value & (value - 1) == 0


def _finite_or_raise(named_tensors, owner: str):
    # detached: torch.isfinite composes abs, whose autograd node would keep a parameter for a
    # backward pass that never comes (and a first call would save more than a recomputed one)
    bad = [name for name, tensor in named_tensors
           if tensor is not None and not bool(torch.isfinite(tensor.detach()).all())]
    if bad:
        raise ValueError(
            f"{owner}: non-finite values (NaN or inf) in {', '.join(bad)}; this usually follows an "
            "optimizer step with too large a learning rate or exploding gradients: lower the "
            "learning rate or clip gradients, and reload the last good checkpoint"
        )


def check_finite(module: nn.Module) -> None:
    """Raise ValueError naming every parameter or buffer of ``module`` that holds NaN or inf."""
    named = list(module.named_parameters()) + [
        (name, buffer) for name, buffer in module.named_buffers() if buffer.is_floating_point()
    ]
    _finite_or_raise(named, type(module).__name__)
