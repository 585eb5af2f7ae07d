"""Fitting one replacement projection to the original model's outputs; the seeds of a study's
fits; its units, checkpointed atomically.

The regression: rows x (attention inputs captured in the partly compressed network) and targets
y = W x_orig (the ORIGINAL projection applied to the ORIGINAL network's attention input at the
same token). Loss: mean squared error; Adam (:func:`galinear.lm.optimise.train`); mini-batches
of 256 rows in a seeded random order; a cosine schedule stepped once per batch with T_max = the
total number of steps, so the rate falls from lr to 0 exactly once over the whole run:

    lr_t = lr * (1 + cos(pi * t / T)) / 2,   t = 0..T-1.

Every fit of a study draws its initialisation and its batch order from :func:`fit_seed`, and is
one unit: fitted, saved atomically, read back by a rerun (its files are named and read by
:class:`galinear.compress.storage.store.Store`). Checkpoints and caches are safetensors files with a JSON
header (:mod:`galinear._io`): loading one never unpickles anything.
"""
from __future__ import annotations

import math
import os

from galinear import _io
from galinear.lm import optimise

#: The slots of :func:`fit_seed` besides q, k and v (0, 1, 2: their index in models.PROJECTIONS).
O_PROJ_SLOT = 7     # the o_proj refit of a layer
DISTILL_SLOT = 17   # the distillation stage of a whole compressed model (layer 0)


def fit_seed(seed: int, layer: int = 0, slot: int = 0) -> int:
    """The torch seed of one fit of a study: ``1_000_003 * seed + 131 * layer + slot``.

    ``seed`` is the study's seed (``--seeds``), ``layer`` the decoder layer fitted and ``slot``
    what is fitted in it: 0, 1, 2 for q, k and v (their index in ``models.PROJECTIONS``),
    :data:`O_PROJ_SLOT` for the o_proj refit, :data:`DISTILL_SLOT` (with layer 0) for the
    distillation stage. The value seeds both the module's initialisation (``torch.manual_seed``
    before it is built) and its batch order (:class:`galinear.lm.optimise.Batches`), so a fit
    depends on nothing fitted before it. The multipliers are primes, large enough that every
    (seed, layer < 7600, slot < 131) has a seed of its own. The joint fit of a layer's q, k and v
    (:mod:`galinear.compress.fitting.objective`) draws its batch order from slot 0.
    """
    return 1_000_003 * seed + 131 * layer + slot


def atomic_save(obj, path: str) -> None:
    """Save ``obj`` (nested dicts/lists of tensors and JSON values) to ``path`` atomically."""
    _io.save_state(path, obj)


def load(path: str, *, recompute: bool = True):
    """Load a file written by :func:`atomic_save`, or None when it does not exist.

    A cache that cannot be read (truncated, damaged, or not a safetensors file: a pickle is never
    read) is removed with a message on stderr and None is returned, so the caller recomputes that
    unit. With ``recompute=False`` such a file raises :class:`galinear._io.UnreadableFileError`
    instead (for files that cannot be recomputed).
    """
    if recompute:
        return _io.load_cache(path)
    if not os.path.exists(path):
        return None
    return _io.load_state(path, fix="delete it and rerun the command that wrote it", pickles=False)


def cached(path: str, make):
    """What ``path`` holds (:func:`load`), or else ``make()``, saved there atomically first: a
    killed run leaves the file whole or absent, and a rerun reads it instead of computing it."""
    value = load(path)
    if value is None:
        value = make()
        atomic_save(value, path)
    return value


def unit_record(module, stats: dict, layer: int, projection: str, spec=None, seed=None) -> dict:
    """The checkpoint of one fitted projection: its state, stats and place, and (q, k, v) the method
    (a MethodSpec) and seed that made it."""
    record = {"state": module.state_dict(), "stats": stats}
    if spec is not None:
        record["spec"] = spec.to_dict()
    record.update(layer=layer, projection=projection)
    if seed is not None:
        record["seed"] = seed
    return record


def summary(what: str, stats: dict) -> str:
    """The log line of a finished Adam fit of ``what`` from its stats."""
    return (f"fitted {what}: {stats['steps']} steps"
            + (f" (best at {stats['best_step']}, {stats['stopped']})" if "best_step" in stats else "")
            + f", {stats['seconds']:.1f} s, final loss {stats['final_loss']:.4g}")


def batch_loss(module, inputs, target_inputs, weight, bias, idx):
    """MSE of ``module`` on the rows ``idx`` against ``target_inputs[idx] @ weight.T (+ bias)``."""
    import torch

    with torch.no_grad():
        target = target_inputs[idx] @ weight.T
        if bias is not None:
            target = target + bias
    return torch.nn.functional.mse_loss(module(inputs[idx]), target)


def adam_regression(module, inputs, target_inputs, weight, bias, *, batch_size: int, seed: int, progress: str | None,
                    lr: float, optimizer: str = "adam", weight_decay: float | None = None):
    """The Adam optimiser and the arguments of :func:`galinear.lm.optimise.train` shared by the
    regressions of one projection (fixed steps here, until converged in
    :mod:`galinear.compress.fitting.converge`): Adam (``optimizer``, at rate ``lr``, ``weight_decay``
    None: torch's default) over its trainable parameters, the MSE on mini-batches of ``batch_size``
    rows in the order seeded by ``seed``, the module, and the message of a non-finite loss; None
    when the module has no trainable parameters."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return None
    weight = weight.detach()
    batches = optimise.Batches(len(inputs), batch_size, seed)
    return {"optimizer": optimise.make_optimizer(optimizer, params, lr, weight_decay), "modules": {"module": module},
            "loss": lambda step: batch_loss(module, inputs, target_inputs, weight, bias, batches.next()),
            "nonfinite": (f"non-finite loss at step {{step}} while fitting {type(module).__name__} "
                          f"({progress or 'projection'}); lower the learning rate"), "progress": progress}


def fit_projection(module, inputs, target_inputs, weight, *, lr: float, epochs: float,
                   batch_size: int = 256, seed: int = 0, bias=None, weight_decay: float = 0.0,
                   optimizer: str = "adam", progress: str | None = None) -> dict:
    """Fit ``module`` so that module(inputs[i]) ~ target_inputs[i] @ weight.T (+ bias).

    Parameters
    ----------
    inputs : (N, d_in) tensor or :class:`galinear.compress.fitting.activations.CaptureShards`
        Inputs in the partly compressed network. A CaptureShards (a capture kept on disk) is read
        batch by batch, and the fit is the same, bit for bit, as with the tensor it holds.
    target_inputs : (N, d_in) tensor or CaptureShards
        The original network's inputs at the same tokens (may be the same object).
    weight : (d_out, d_in) tensor
        The original projection's weight; targets are formed batch by batch.
    epochs : float
        Passes over the rows; a fraction runs that share of one pass.
    optimizer : {"adam", "adamw"}

    Returns
    -------
    dict with ``steps``, ``final_loss`` (mean of the last 10 batch losses) and ``lr_last``.
    """
    n = len(inputs)
    if n == 0:
        raise ValueError("no training rows to fit")
    total = max(1, int(round(epochs * math.ceil(n / batch_size))))
    fit = adam_regression(module, inputs, target_inputs, weight, bias, batch_size=batch_size, seed=seed, progress=progress,
                          lr=lr, optimizer=optimizer, weight_decay=weight_decay)
    if fit is None:  # nothing to fit (the zero baseline)
        return {"steps": 0, "final_loss": float("nan"), "lr_last": 0.0}
    run = optimise.train(**fit, steps=total, scheduler=optimise.cosine_scheduler(fit["optimizer"], total))
    return {"steps": total, "final_loss": run.final_loss, "lr_last": run.lr_used}


__all__ = ["DISTILL_SLOT", "O_PROJ_SLOT", "adam_regression", "atomic_save", "batch_loss", "cached",
           "fit_projection", "fit_seed", "load", "summary", "unit_record"]
