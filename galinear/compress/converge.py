"""Adam fits that run until the held-out error stops improving, with their learning curves.

The stopping rule (``--until-converged``): Adam at the method's learning rate, mini-batches of
``batch_size`` rows in a seeded random order (a new permutation every pass). Every
``eval_every`` steps (and at step 0) the mean squared error on **validation rows** is measured:
rows of training-side windows that are not among the fitted windows (never held-out windows,
see :func:`galinear.compress.windows.split_windows`). An evaluation improves when it is below
``(1 - min_delta)`` times the best so far. After ``patience`` evaluations in a row without
improvement the learning rate is multiplied by ``decay`` (at most ``decays`` times, each decay
restarting the count); the next such plateau, or ``max_steps``, ends the fit. The parameters of
the best evaluation are restored at the end, so the returned module is the one whose validation
MSE is recorded.

The learning curve (step, validation MSE) of every fit is returned and kept in the run folder.
"""
from __future__ import annotations

import copy
import math

from galinear.compress.fit import batch_loss


def _validation_mse(module, inputs, target_inputs, weight, bias, batch_size: int = 4096) -> float:
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(inputs), batch_size):
            target = target_inputs[i:i + batch_size] @ weight.T
            if bias is not None:
                target = target + bias
            diff = module(inputs[i:i + batch_size]) - target
            total += float(diff.double().pow(2).sum())
            count += diff.numel()
    return total / max(count, 1)


def fit_until_converged(module, inputs, target_inputs, weight, *, valid_inputs, valid_target_inputs,
                        lr: float, bias=None, batch_size: int = 256, seed: int = 0, max_steps: int = 2000,
                        eval_every: int = 25, patience: int = 4, min_delta: float = 1e-3, decay: float = 0.3,
                        decays: int = 1, progress: str | None = None) -> dict:
    """Fit ``module(inputs) ~ target_inputs @ weight.T + bias`` until the validation MSE stops improving.

    Returns a dict with ``steps`` (taken), ``best_step``, ``stopped`` ("plateau" or "max_steps"),
    ``final_loss`` (mean of the last 10 batch losses), ``valid_mse`` (best), ``valid_target_mean_square``,
    ``lr_last`` and ``curve`` (a list of [step, validation MSE]).
    """
    import torch
    from tqdm.auto import tqdm

    n = len(inputs)
    if n == 0:
        raise ValueError("no training rows to fit")
    if len(valid_inputs) == 0:
        raise ValueError("no validation rows for the stopping rule; give more training windows (--train-windows)")
    for name, value in (("max_steps", max_steps), ("eval_every", eval_every), ("patience", patience)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    weight = weight.detach()
    with torch.no_grad():
        vt = valid_target_inputs @ weight.T + (0 if bias is None else bias)
        valid_ms = float(vt.double().pow(2).mean())
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        mse = _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias)
        return {"steps": 0, "best_step": 0, "stopped": "no parameters", "final_loss": float("nan"),
                "valid_mse": mse, "valid_target_mean_square": valid_ms, "lr_last": 0.0, "curve": [[0, mse]]}
    opt = torch.optim.Adam(params, lr=lr)
    generator = torch.Generator().manual_seed(seed)
    module.eval()
    best = _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias)
    curve = [[0, best]]
    best_step, best_state = 0, copy.deepcopy(module.state_dict())
    since, decays_left, stopped = 0, decays, "max_steps"
    order, pos = torch.empty(0, dtype=torch.long), 0
    recent = []
    bar = tqdm(range(1, max_steps + 1), desc=progress, disable=progress is None, leave=False)
    step = 0
    for step in bar:
        module.train()
        if pos >= len(order):
            order, pos = torch.randperm(n, generator=generator), 0
        idx = order[pos:pos + batch_size]
        pos += batch_size
        loss = batch_loss(module, inputs, target_inputs, weight, bias, idx, step, progress)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent = (recent + [loss.item()])[-10:]
        if step % eval_every and step != max_steps:
            continue
        module.eval()
        value = _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias)
        curve.append([step, value])
        bar.set_postfix(valid=f"{value:.3g}")
        if value < best * (1.0 - min_delta):
            best, best_step, since = value, step, 0
            best_state = copy.deepcopy(module.state_dict())
        else:
            if value < best:  # a small gain: keep the better parameters, still count the plateau
                best, best_step = value, step
                best_state = copy.deepcopy(module.state_dict())
            since += 1
            if since >= patience:
                if decays_left > 0:
                    decays_left -= 1
                    since = 0
                    for group in opt.param_groups:
                        group["lr"] *= decay
                else:
                    stopped = "plateau"
                    break
    module.load_state_dict(best_state)
    module.eval()
    return {"steps": int(step), "best_step": int(best_step), "stopped": stopped,
            "final_loss": sum(recent) / len(recent) if recent else float("nan"), "valid_mse": best,
            "valid_target_mean_square": valid_ms, "lr_last": opt.param_groups[0]["lr"], "curve": curve,
            "epochs_run": step * batch_size / n if n else math.nan}


__all__ = ["fit_until_converged"]
