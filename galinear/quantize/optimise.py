r"""How a learned rotation's parameters follow their loss (``--optimizer``), checkpointed and resumed.

- ``adam`` (:func:`adam`): one Adam step per ``loss_at(step)``, a stochastic loss (one calibration
  window drawn per step). Adam's first steps move every parameter by about the rate whatever the
  size of its gradient, so a parameter whose gradient is mostly noise moves as far as one whose
  gradient is signal.
- ``descent`` (:func:`descend`): steepest descent with a backtracking line search on a deterministic
  loss (every calibration window, the same tokens, every step). Each step takes the gradient
  :math:`g` at the parameters :math:`x`, the direction :math:`d = -g / \operatorname{rms}(g)` (one
  scale over all the learned parameters, so a step of rate t moves them by t in the mean square, as
  Adam's first step does) and tries :math:`x + t d`: the first trial whose loss is below the loss at
  :math:`x` is taken and the next step starts at 2t; a trial that does not lower it halves t, up to
  ``halvings`` times. When none does, the descent stops where it is. The loss that is followed
  never rises, so the end is never worse on the calibration tokens than the start. It suits a few
  hundred parameters, where a step costs a pass over all the calibration tokens and nothing else;
  its trials are forward passes, and the accepted one's graph gives the next gradient.

Both write the parameters, the optimiser's state and the loss history atomically every
``checkpoint_every`` steps (:func:`galinear._io.save_state`, tensors on the CPU so that the file
resumes on any device); a rerun with the same settings resumes from the file and ends bit for bit where an
uninterrupted run ends. :func:`keep_better` then keeps the trained parameters or the start, whichever
scores better.
"""
from __future__ import annotations

import math
import os
import time

import torch

from galinear import _io

__all__ = ["OPTIMIZERS", "HALVINGS", "adam", "descend", "keep_better"]

#: The choices of ``--optimizer``.
OPTIMIZERS = ("adam", "descent")
#: Halvings of the rate a step of :func:`descend` tries before it stops.
HALVINGS = 5


def _on_cpu(state: dict) -> dict:
    """``state`` with its tensors on the CPU (a CPU tensor is itself, a tensor elsewhere copied)."""
    return {k: v.detach().cpu() if torch.is_tensor(v) else v for k, v in state.items()}


def _parameters_on_cpu(rotation) -> dict:
    return {k: v.detach().to("cpu", copy=True) for k, v in rotation.state_dict().items()}


def _checkpoint_state(rotation, optimiser, step, history, settings) -> dict:
    """What :func:`adam` checkpoints, its tensors on the CPU: the file loads on any device
    (:func:`_restore` moves them to the rotation's)."""
    opt = optimiser.state_dict()
    return {"rotation": _parameters_on_cpu(rotation),
            "optimiser": {"state": {str(k): _on_cpu(v) for k, v in opt["state"].items()},
                          "param_groups": opt["param_groups"]},
            "step": step, "history": history, "settings": settings}


def _load(path, rotation, settings) -> dict:
    state = _io.load_state(path, fix="delete it to start the calibration again", pickles=False)
    if state.get("settings") != settings:
        raise ValueError(f"{path} holds a calibration of other settings ({state.get('settings')}); delete it or give "
                         "another --out to start this one")
    rotation.load_state_dict(state["rotation"])
    return state


def _restore(path, rotation, optimiser, settings):
    """Resume :func:`adam` from the checkpoint ``path`` (tensors read on the CPU; the rotation's and the
    optimiser's ``load_state_dict`` move them to the rotation's device)."""
    state = _load(path, rotation, settings)
    opt = state["optimiser"]
    optimiser.load_state_dict({"state": {int(k): v for k, v in opt["state"].items()},
                               "param_groups": opt["param_groups"]})
    return int(state["step"]), list(state["history"])


def adam(rotation, loss_at, settings: dict, steps: int, lr: float, checkpoint=None, checkpoint_every: int = 5,
         log=None, stop_after=None) -> dict:
    """Adam on ``rotation``'s parameters, one step per ``loss_at(step)``, checkpointed atomically every
    ``checkpoint_every`` steps and resumed from ``checkpoint`` when it holds the same ``settings``.
    ``stop_after``: return after that many steps of this call (an interruption, for tests). Returns
    {"history", "seconds", "steps", "resumed_from"}."""
    params = [p for p in rotation.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam(params, lr=lr)
    start, history = 0, []
    if checkpoint and os.path.exists(checkpoint):
        start, history = _restore(checkpoint, rotation, optimiser, settings)
    t0 = time.perf_counter()
    done = 0
    for step in range(start, steps):
        if stop_after is not None and done >= stop_after:
            break
        optimiser.zero_grad(set_to_none=True)
        loss = loss_at(step)
        loss.backward()
        optimiser.step()
        history.append(float(loss.detach()))
        done += 1
        if log:
            log(f"{rotation.family} step {step + 1}/{steps}: {settings['objective']} loss {history[-1]:.5f}")
        if checkpoint and ((step + 1) % checkpoint_every == 0 or step + 1 == steps):
            _io.save_state(checkpoint, _checkpoint_state(rotation, optimiser, step + 1, history, settings))
    return {"history": history, "seconds": time.perf_counter() - t0, "steps": len(history), "resumed_from": start}


def _value_and_gradient(loss, params):
    """loss() and its gradients, taken from a fresh graph."""
    for p in params:
        p.grad = None
    value = loss()
    value.backward()
    return float(value.detach()), [p.grad.detach().clone() for p in params]


def descend(rotation, loss, settings: dict, steps: int, lr: float, checkpoint=None, checkpoint_every: int = 5,
            log=None, stop_after=None, halvings: int = HALVINGS) -> dict:
    """Steepest descent with a backtracking line search (module doc) on ``rotation``'s parameters,
    following the deterministic ``loss()`` for at most ``steps`` steps from the rate ``lr``;
    checkpointed and resumed as :func:`adam` is. Returns {"history" (the loss where each step
    started), "seconds", "steps", "resumed_from", "line_search": {"rate" (the next step's first
    trial), "trials" (per step), "stopped" (no trial of the last step lowered the loss)}}."""
    if isinstance(halvings, bool) or not isinstance(halvings, int) or halvings < 0:
        raise ValueError(f"halvings must be an integer >= 0, got {halvings!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"--lr must be a positive number, got {lr!r}")
    params = [p for p in rotation.parameters() if p.requires_grad]
    count = sum(p.numel() for p in params)
    search = {"rate": float(lr), "trials": [], "stopped": False}
    start, history = 0, []
    if checkpoint and os.path.exists(checkpoint):
        state = _load(checkpoint, rotation, settings)
        start, history = int(state["step"]), list(state["history"])
        saved = state["optimiser"]
        search = {"rate": float(saved["rate"]), "trials": [int(n) for n in saved["trials"]],
                  "stopped": bool(saved["stopped"])}
    t0 = time.perf_counter()
    done, step, here = 0, start, None
    while step < steps and not search["stopped"] and (stop_after is None or done < stop_after):
        if here is None:  # the first step of this call: the gradient from a fresh pass
            here = _value_and_gradient(loss, params)
        value, grads = here
        rms = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads) / max(count, 1))
        start_point = [p.detach().clone() for p in params]
        rate, trials, taken = search["rate"], 0, None
        if math.isfinite(value) and math.isfinite(rms) and rms > 0:
            for _ in range(halvings + 1):
                trials += 1
                with torch.no_grad():
                    for p, x, g in zip(params, start_point, grads):
                        p.copy_(x - (rate / rms) * g)
                    for p in params:
                        p.grad = None
                trial = loss()
                if float(trial.detach()) < value:
                    trial.backward()
                    taken = (float(trial.detach()), [p.grad.detach().clone() for p in params])
                    break
                del trial
                rate /= 2
        history.append(value)
        search["trials"].append(trials)
        if taken is None:  # no trial lowered the loss: stay where the step started, and stop
            with torch.no_grad():
                for p, x in zip(params, start_point):
                    p.copy_(x)
            search["stopped"] = True
        else:
            here, search["rate"] = taken, rate * 2
        step, done = step + 1, done + 1
        if log:
            log(f"{rotation.family} step {step}/{steps}: {settings['objective']} loss {value:.5f}, "
                + (f"rate {rate:.3g} taken ({trials} trial{'s' * (trials > 1)})" if taken else
                   f"no trial of {trials} lowered it: stopped"))
        if checkpoint and (step % checkpoint_every == 0 or step == steps or search["stopped"]):
            _io.save_state(checkpoint, {"rotation": _parameters_on_cpu(rotation), "optimiser": dict(search),
                                        "step": step, "history": history, "settings": settings})
    return {"history": history, "seconds": time.perf_counter() - t0, "steps": len(history), "resumed_from": start,
            "line_search": {"rate": search["rate"], "trials": list(search["trials"]), "stopped": search["stopped"]}}


def keep_better(rotation, score, log=None) -> dict:
    """Score the trained parameters and the start (every learned parameter zero: the Hadamard
    :math:`Q_0`) with ``score()`` (lower is better) and keep the better; returns both and which was kept."""
    trained = {k: v.detach().clone() for k, v in rotation.state_dict().items()}
    end = score()
    with torch.no_grad():
        for p in rotation.parameters():
            p.zero_()
    start = score()
    kept = "start" if start <= end else "trained"
    if kept == "trained":
        rotation.load_state_dict(trained)
    if log:
        log(f"{rotation.family}: calibration KL {start:.5f} at the start, {end:.5f} trained; kept the {kept} one")
    return {"calibration_kl": {"start": start, "trained": end, "kept": kept}}
