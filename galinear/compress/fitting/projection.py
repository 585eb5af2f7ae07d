"""Fitting one replacement projection to the original model's outputs by Adam.

The regression: rows x (attention inputs captured in the partly compressed network) and targets
y = W x_orig (the ORIGINAL projection applied to the ORIGINAL network's attention input at the
same token). Loss: mean squared error; Adam (:func:`galinear.optim.loop.train`); mini-batches
of 256 rows in a seeded random order; a cosine schedule stepped once per batch with T_max = the
total number of steps, so the rate falls from lr to 0 exactly once over the whole run:

    lr_t = lr * (1 + cos(pi * t / T)) / 2,   t = 0..T-1.

Every fit of a study draws its initialisation and its batch order from
:func:`galinear.compress.fitting.seeds.fit_seed`.
"""
from __future__ import annotations

import math

from galinear.optim import loop as optimise


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
    """The Adam optimiser and the arguments of :func:`galinear.optim.loop.train` shared by the
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


__all__ = ["adam_regression", "batch_loss", "fit_projection", "summary"]
