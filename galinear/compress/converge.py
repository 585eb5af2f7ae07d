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
import time

from galinear.compress.fit import batch_loss, progress_steps


class Plateau:
    """The stopping rule's bookkeeping: the best value so far, evaluations without improvement,
    learning-rate decays left.

    ``update(value, step)`` returns "better" (below (1 - min_delta) * best), "slight" (below the
    best, but not by min_delta: kept as the best, still counted as no improvement) or "worse".
    After ``patience`` evaluations in a row without improvement, :meth:`decay_now` is True once
    (if decays are left; the count restarts) or :attr:`stopped` becomes True.
    """

    def __init__(self, patience: int = 4, min_delta: float = 1e-3, decay: float = 0.3, decays: int = 1):
        self.patience, self.min_delta, self.decay, self.decays_left = patience, min_delta, decay, decays
        self.best, self.best_step, self.since = math.inf, 0, 0
        self.stopped, self._decay = False, False

    def update(self, value: float, step: int, optimizer=None) -> str:
        """Record the evaluation ``value`` at ``step``; a decay is applied to ``optimizer``'s rates."""
        verdict = self._update(value, step)
        if self._decay and optimizer is not None:
            for group in optimizer.param_groups:
                group["lr"] *= self.decay
        return verdict

    def _update(self, value: float, step: int) -> str:
        self._decay = False
        if value < self.best * (1.0 - self.min_delta) or self.best == math.inf:
            self.best, self.best_step, self.since = value, step, 0
            return "better"
        verdict = "worse"
        if value < self.best:
            self.best, self.best_step, verdict = value, step, "slight"
        self.since += 1
        if self.since >= self.patience:
            if self.decays_left > 0:
                self.decays_left -= 1
                self.since, self._decay = 0, True
            else:
                self.stopped = True
        return verdict

    def decay_now(self) -> bool:
        """True right after the update that asked for a learning-rate decay."""
        return self._decay


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
    :class:`galinear.compress.activations.CaptureShards` (rows read from disk batch by batch,
    with the same result).

    Returns a dict with ``steps`` (taken), ``best_step``, ``stopped`` ("plateau" or "max_steps"),
    ``final_loss`` (mean of the last 10 batch losses), ``valid_mse`` (best), ``valid_target_mean_square``,
    ``lr_last`` and ``curve`` (a list of [step, validation MSE]).
    """
    import torch

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
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        mse = _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias)
        return {"steps": 0, "best_step": 0, "stopped": "no parameters", "final_loss": float("nan"),
                "valid_mse": mse, "valid_target_mean_square": valid_ms, "lr_last": 0.0, "curve": [[0, mse]]}
    opt = torch.optim.Adam(params, lr=lr)
    generator = torch.Generator().manual_seed(seed)
    module.eval()
    plateau = Plateau(patience=patience, min_delta=min_delta, decay=decay, decays=decays)
    plateau.update(_validation_mse(module, valid_inputs, valid_target_inputs, weight, bias), 0)
    curve = [[0, plateau.best]]
    best_state = copy.deepcopy(module.state_dict())
    stopped = "max_steps"
    order, pos = torch.empty(0, dtype=torch.long), 0
    recent = []
    bar = progress_steps(max_steps, progress)
    t0, step = time.perf_counter(), 0
    for step in range(1, max_steps + 1):
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
            bar.step(step)
            continue
        module.eval()
        value = _validation_mse(module, valid_inputs, valid_target_inputs, weight, bias)
        curve.append([step, value])
        bar.step(step, f"validation MSE {value:.4g}")
        if plateau.update(value, step, opt) != "worse":
            best_state = copy.deepcopy(module.state_dict())
        if plateau.stopped:
            stopped = "plateau"
            break
    bar.close(f"{step} steps, {time.perf_counter() - t0:.1f} s")
    module.load_state_dict(best_state)
    module.eval()
    return {"steps": int(step), "best_step": int(plateau.best_step), "stopped": stopped,
            "final_loss": sum(recent) / len(recent) if recent else float("nan"), "valid_mse": plateau.best,
            "valid_target_mean_square": valid_ms, "lr_last": opt.param_groups[0]["lr"], "curve": curve,
            "epochs_run": step * batch_size / n if n else math.nan}


__all__ = ["Plateau", "fit_until_converged"]
