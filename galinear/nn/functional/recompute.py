"""Activations that autograd would keep for the backward pass and that are cheaper to compute
again than to hold: :func:`recomputed` drops them at the forward pass and rebuilds them when the
backward pass reads them.

A :class:`~galinear.nn.RotorNetwork` stage's batched product keeps its input (tokens x width) for
the gradient of its blocks. That input is a cheap function of a tensor kept anyway: the previous
stage's chunk-pair outputs (one :func:`~galinear.nn.functional.branches.branch_sum` pass) or the
network's own input (one gather). Under :func:`recomputed` the product keeps a recipe instead.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

__all__ = ["recomputed"]


@dataclass(frozen=True)
class _Recipe:
    """Where a dropped tensor lay in ``source`` (a view of it, or itself) and the versions of the
    tensors the recompute reads, taken when it was dropped."""

    size: tuple
    stride: tuple
    offset: int
    versions: tuple


def _hooks_active() -> bool:
    """Whether saved-tensor hooks are already in force (torch.utils.checkpoint, a caller's own):
    they decide what is kept, and a second pair inside would hide tensors from them."""
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


@contextlib.contextmanager
def recomputed(source: torch.Tensor, recompute, guards=()):
    """Within the block, a tensor that autograd saves and that is ``source`` or a view of its
    storage is not kept: the backward pass calls ``recompute()``, which must return a tensor laid
    out as ``source`` (same shape, strides and values), and reads the same view of it; a graph of
    the backward pass (``create_graph``) still reaches the source's history, which autograd gives
    the unpacked tensor. ``guards``: the tensors ``recompute`` reads; changing one in place
    between the forward and the backward pass raises the error autograd raises for the tensors it
    keeps. Where saved-tensor hooks are already in force (``torch.utils.checkpoint``), everything
    is kept as usual and they decide."""
    if _hooks_active() or not torch.is_grad_enabled():
        yield
        return
    # the hooks hold only what identifies the source, never the tensor: autograd keeps them
    storage, offset, dtype, device = (source.untyped_storage().data_ptr(), source.storage_offset(), source.dtype,
                                      source.device)

    def pack(t):
        if t.dtype != dtype or t.device != device or t.untyped_storage().data_ptr() != storage:
            return t
        return _Recipe(tuple(t.shape), t.stride(), t.storage_offset() - offset, tuple(g._version for g in guards))

    def unpack(packed):
        if not isinstance(packed, _Recipe):
            return packed
        if tuple(g._version for g in guards) != packed.versions:
            raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                               "inplace operation: a RotorNetwork stage's input is recomputed in the backward pass "
                               "from tensors that changed after the forward pass; run the forward pass again")
        with torch.no_grad():  # autograd gives the unpacked tensor the saved one's history (create_graph too)
            base = recompute()
        return base.as_strided(packed.size, packed.stride, base.storage_offset() + packed.offset)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield
