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
import time

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


class Progress:
    """Progress of one unit of ``total`` steps labelled ``label`` (None: silent).

    On a terminal (``stream.isatty()``) a tqdm bar that is cleared at the end. Otherwise, for a
    log: no bar and no carriage return, one line when the unit ends with its elapsed time, and a
    line at most every ``every`` seconds while it runs (long units).
    """

    def __init__(self, total: int, label: str | None, stream=None, every: float = 60.0):
        self.total, self.label, self.every = int(total), label, every
        self.stream = sys.stderr if stream is None else stream
        self.t0 = self.last = time.perf_counter()
        self.bar = None
        if label is not None and _isatty(self.stream):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc=label, leave=False, file=self.stream)

    def _line(self, text: str) -> None:
        print(f"{self.label}: {text} ({time.perf_counter() - self.t0:.1f} s)", file=self.stream, flush=True)

    def step(self, n: int, note: str | None = None) -> None:
        """Unit ``n`` of ``total`` is done; ``note`` is shown beside it."""
        if self.label is None:
            return
        if self.bar is not None:
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n - self.bar.n)
        elif time.perf_counter() - self.last >= self.every:
            self.last = time.perf_counter()
            self._line(f"{n}/{self.total}" + (f", {note}" if note else ""))

    def close(self, summary: str | None = None) -> None:
        if self.label is None:
            return
        if self.bar is not None:
            self.bar.close()
        else:
            self._line(summary or f"{self.total} done")


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_steps(total: int, label: str | None, stream=None) -> Progress:
    """A :class:`Progress` for ``total`` steps (see there)."""
    return Progress(total, label, stream)


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
    inputs : (N, d_in) tensor or :class:`galinear.compress.activations.CaptureShards`
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
    import torch

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
    bar = progress_steps(total, progress)
    lr_last = lr
    for step in range(total):
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
        bar.step(step + 1, f"loss {recent[-1]:.3g}")
    bar.close(f"{total} steps, final loss {sum(recent) / len(recent):.4g}")
    module.eval()
    return {"steps": total, "final_loss": sum(recent) / len(recent), "lr_last": lr_last}
