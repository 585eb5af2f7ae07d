"""Adam fits that run until the held-out error stops improving, with their learning curves.

The stopping rule (``--until-converged``): Adam at the method's learning rate, mini-batches of
``batch_size`` rows in a seeded random order (a new permutation every pass). Every
``eval_every`` steps (and at step 0) the mean squared error on **validation rows** is measured:
rows of training-side windows that are not among the fitted windows (never held-out windows,
see :func:`galinear.lm.windows.split_windows`). An evaluation improves when it is below
``(1 - min_delta)`` times the best so far. After ``patience`` evaluations in a row without
improvement the learning rate is multiplied by ``decay`` (at most ``decays`` times, each decay
restarting the count); the next such plateau, or ``max_steps``, ends the fit. The parameters of
the best evaluation are restored at the end, so the returned module is the one whose validation
MSE is recorded. The loop and the rule's bookkeeping (:class:`galinear.optim.loop.Plateau`) are those of
:func:`galinear.optim.loop.train`.

The learning curve (step, validation MSE) of every fit is returned and kept in the run folder.
"""
from __future__ import annotations

import math

from galinear.compress.fitting.projection import adam_regression
from galinear.optim.loop import Plateau, train


def _mean_square(target_inputs, weight, bias, module=None, inputs=None, batch_size: int = 4096) -> float:
    """Mean square of ``target_inputs @ weight.T + bias`` (minus ``module(inputs)`` when given),
    accumulated in float64 chunk by chunk."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(target_inputs), batch_size):
            value = target_inputs[i:i + batch_size] @ weight.T
            if bias is not None:
                value = value + bias
            if module is not None:
                value = module(inputs[i:i + batch_size]) - value
            total += float(value.double().pow(2).sum())
            count += value.numel()
    return total / max(count, 1)


def _target_mean_square(target_inputs, weight, bias, batch_size: int = 4096) -> float:
    return _mean_square(target_inputs, weight, bias, batch_size=batch_size)


def _validation_mse(module, inputs, target_inputs, weight, bias, batch_size: int = 4096) -> float:
    return _mean_square(target_inputs, weight, bias, module, inputs, batch_size)


def fit_until_converged(module, inputs, target_inputs, weight, *, valid_inputs, valid_target_inputs,
                        lr: float, bias=None, batch_size: int = 256, seed: int = 0, max_steps: int = 2000,
                        eval_every: int = 25, patience: int = 4, min_delta: float = 1e-3, decay: float = 0.3,
                        decays: int = 1, progress: str | None = None) -> dict:
    """Fit ``module(inputs) ~ target_inputs @ weight.T + bias`` until the validation MSE stops improving.

    ``inputs``, ``target_inputs`` and the validation rows are (N, d_in) tensors or
    :class:`galinear.compress.fitting.activations.CaptureShards` (rows read from disk batch by batch,
    with the same result).

    Returns a dict with ``steps`` (taken), ``best_step``, ``stopped`` ("plateau" or "max_steps"),
    ``final_loss`` (mean of the last 10 batch losses), ``valid_mse`` (best), ``valid_target_mean_square``,
    ``lr_last`` and ``curve`` (a list of [step, validation MSE]).
    """
    n = len(inputs)
    if n == 0:
        raise ValueError("no training rows to fit")
    if len(valid_inputs) == 0:
        raise ValueError("no validation rows for the stopping rule; give more training windows (--train-windows)")
    for name, value in (("max_steps", max_steps), ("eval_every", eval_every), ("patience", patience)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    weight = weight.detach()
    valid_ms = _target_mean_square(valid_target_inputs, weight, bias)
    fit = adam_regression(module, inputs, target_inputs, weight, bias, batch_size=batch_size, seed=seed, progress=progress,
                          lr=lr)
    if fit is None:
        mse = _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias)
        return {"steps": 0, "best_step": 0, "stopped": "no parameters", "final_loss": float("nan"),
                "valid_mse": mse, "valid_target_mean_square": valid_ms, "lr_last": 0.0, "curve": [[0, mse]]}
    run = train(**fit, steps=max_steps, eval_every=eval_every,
                validate=lambda: _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias),
                plateau=Plateau(patience=patience, min_delta=min_delta, decay=decay, decays=decays))
    return {"steps": int(run.step), "best_step": int(run.plateau.best_step), "stopped": run.stopped,
            "final_loss": run.final_loss, "valid_mse": run.plateau.best, "valid_target_mean_square": valid_ms,
            "lr_last": run.lr, "curve": run.curve, "epochs_run": run.step * batch_size / n if n else math.nan}


__all__ = ["fit_until_converged"]
