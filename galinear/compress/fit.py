"""Fitting one replacement projection to the original model's outputs, and atomic checkpoints.

The regression: rows x (attention inputs captured in the partly compressed network) and targets
y = W x_orig (the ORIGINAL projection applied to the ORIGINAL network's attention input at the
same token). Loss: mean squared error; Adam; mini-batches of 256 rows in a seeded random order;
a cosine schedule stepped once per batch with T_max = the total number of steps, so the rate
falls from lr to 0 exactly once over the whole run:

    lr_t = lr * (1 + cos(pi * t / T)) / 2,   t = 0..T-1.

Checkpoints and caches are safetensors files with a JSON header (:mod:`galinear._io`): loading
one never unpickles anything.
"""
from __future__ import annotations

import math
import os
import sys

from galinear import _io, _util


def atomic_save(obj, path: str) -> None:
    """Save ``obj`` (nested dicts/lists of tensors and JSON values) to ``path`` atomically."""
    _io.save_state(path, obj)


def load(path: str, *, recompute: bool = True):
    """Load a file written by :func:`atomic_save`, or None when it does not exist.

    A cache that cannot be read (truncated, damaged, or an older galinear's pickle that holds
    more than tensors) is removed with a message on stderr and None is returned, so the caller
    recomputes that unit. With ``recompute=False`` such a file raises
    :class:`galinear._io.UnreadableFileError` instead (for files that cannot be recomputed).
    """
    if not os.path.exists(path):
        return None
    if not recompute:
        return _io.load_state(path, fix="delete it and rerun the command that wrote it")
    try:
        return _io.load_state(path)
    except _io.UnreadableFileError as error:
        print(f"galinear: {error}; removing it and recomputing this unit", file=sys.stderr, flush=True)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return None


def cosine_lr(step: int, total: int, lr: float) -> float:
    """Learning rate of step ``step`` (0-based) out of ``total``: lr * (1 + cos(pi step / total)) / 2."""
    return lr * _util.cosine_schedule(step, total)


def batch_loss(module, inputs, target_inputs, weight, bias, idx, step: int, progress: str | None):
    """MSE of ``module`` on the rows ``idx`` against ``target_inputs[idx] @ weight.T (+ bias)``;
    a non-finite loss raises FloatingPointError naming the step and the module."""
    import torch

    with torch.no_grad():
        target = target_inputs[idx] @ weight.T
        if bias is not None:
            target = target + bias
    loss = torch.nn.functional.mse_loss(module(inputs[idx]), target)
    if not torch.isfinite(loss.detach()):
        raise FloatingPointError(f"non-finite loss at step {step} while fitting {type(module).__name__} "
                                 f"({progress or 'projection'}); lower the learning rate")
    return loss


def fit_projection(module, inputs, target_inputs, weight, *, lr: float, epochs: float,
                   batch_size: int = 256, seed: int = 0, bias=None, weight_decay: float = 0.0,
                   optimizer: str = "adam", progress: str | None = None) -> dict:
    """Fit ``module`` so that module(inputs[i]) ~ target_inputs[i] @ weight.T (+ bias).

    Parameters
    ----------
    inputs : (N, d_in) tensor
        Inputs in the partly compressed network.
    target_inputs : (N, d_in) tensor
        The original network's inputs at the same tokens (may be the same tensor).
    weight : (d_out, d_in) tensor
        The original projection's weight; targets are formed batch by batch.
    epochs : float
        Passes over the rows; a fraction runs that share of one pass.
    optimizer : {"adam", "adamw"}

    Returns
    -------
    dict with ``steps``, ``final_loss`` (mean of the last 10 batch losses) and ``lr_last``.
    """
    import torch
    from tqdm.auto import tqdm

    n = len(inputs)
    if n == 0:
        raise ValueError("no training rows to fit")
    steps_per_epoch = math.ceil(n / batch_size)
    total = max(1, int(round(epochs * steps_per_epoch)))
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:  # nothing to fit (the zero baseline)
        return {"steps": 0, "final_loss": float("nan"), "lr_last": 0.0}
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    elif optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    else:
        raise ValueError(f"optimizer must be 'adam' or 'adamw', got {optimizer!r}")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: cosine_lr(t, total, 1.0))
    generator = torch.Generator().manual_seed(seed)
    weight = weight.detach()
    module.train()
    recent = []
    order = torch.empty(0, dtype=torch.long)
    pos = 0
    bar = tqdm(range(total), desc=progress, disable=progress is None, leave=False)
    lr_last = lr
    for step in bar:
        if pos >= len(order):
            order, pos = torch.randperm(n, generator=generator), 0
        idx = order[pos:pos + batch_size]
        pos += batch_size
        loss = batch_loss(module, inputs, target_inputs, weight, bias, idx, step, progress)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        lr_last = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        recent.append(loss.item())
        recent = recent[-10:]
        if step % 20 == 0:
            bar.set_postfix(loss=f"{recent[-1]:.3g}")
    module.eval()
    return {"steps": total, "final_loss": sum(recent) / len(recent), "lr_last": lr_last}
