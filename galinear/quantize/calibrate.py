r"""Calibration: what the quantizers and the learned rotations see of the calibration text.

- :func:`capture_layer` runs the model on the calibration windows up to one decoder layer and
  returns, for each of its linear layers, the Hessian :math:`X^T X` of its inputs (float64) and a
  sample of input rows; the pass stops after that layer.
- :func:`quantize_weights` quantizes every linear layer of every decoder layer, RTN or GPTQ; GPTQ
  goes layer by layer, each layer's Hessians taken with the layers before it already quantized.
- :func:`train_rotation` learns R1 of a learned family against the quantized layers' output error
  (straight-through rounding): for a layer reading the stream with weight W and input Hessian H the
  loss is :math:`\operatorname{tr}(E H E^T) / \operatorname{tr}(W H W^T)` (estimated each step on
  ``rows_per_step`` output channels of each projection),
  :math:`E = \hat{Q}(W Q) Q^T - W` (:math:`E = Q \hat{Q}(Q^T W) - W` for a layer writing it), plus
  with quantized activations the relative error of the per-token quantized stream rows
  :math:`\|\hat{Q}_a(x Q) Q^T - x\|^2 / \|x\|^2`. Each step draws ``layers_per_step`` decoder
  layers from a generator seeded by (seed, step), runs Adam, and every ``checkpoint_every`` steps
  writes the rotation, the optimiser state and the loss history atomically (a safetensors state
  file, :func:`galinear._io.save_state`); a rerun resumes from it and ends bit for bit where an
  uninterrupted run ends.
"""
from __future__ import annotations

import os
import time

import numpy as np
import torch

from galinear import _io
from galinear.lm import models
from galinear.quantize.fusion import READERS, WRITERS
from galinear.quantize.gptq import gptq_quantize
from galinear.quantize.quantizers import quantize_activation, quantize_weight

__all__ = ["LINEARS", "capture_layer", "capture_layers", "quantize_weights", "train_rotation", "rotation_loss", "LayerStats"]

LINEARS = READERS + WRITERS
#: Input rows kept per linear layer for the clipping search and the activation term.
SAMPLE_ROWS = 256


class _Stop(Exception):
    pass


class LayerStats(dict):
    """{projection: {"hessian": (in, in) float64, "rows": (<= SAMPLE_ROWS, in), "count": tokens}}."""


def capture_layers(model, windows, layers, sample_rows: int = SAMPLE_ROWS, seed: int = 0) -> list:
    """:class:`LayerStats` of every decoder layer in ``layers``, in one forward pass per window (a
    list of 1-D id tensors); the pass stops after the last of them."""
    blocks = models.decoder_layers(model)
    layers = list(layers)
    last = max(layers)
    found = {index: LayerStats() for index in layers}
    handles = []
    generator = torch.Generator().manual_seed(seed * 1000 + min(layers))

    def hook(stats, name, stop):
        def record(module, args):
            x = args[0].detach().reshape(-1, args[0].shape[-1])
            entry = stats.setdefault(name, {"hessian": torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64),
                                            "rows": [], "count": 0})
            entry["hessian"] += x.double().t() @ x.double()
            entry["count"] += x.shape[0]
            pick = torch.randperm(x.shape[0], generator=generator)[:sample_rows]
            entry["rows"].append(x[pick].float())
            if stop:
                raise _Stop
        return record

    for index in layers:
        for name in LINEARS:
            module = getattr(models.holder(blocks[index], name), name)
            handles.append(module.register_forward_pre_hook(hook(found[index], name,
                                                                 index == last and name == "down_proj")))
    try:
        with torch.no_grad():
            for ids in windows:
                try:
                    model(input_ids=ids.reshape(1, -1), use_cache=False)
                except _Stop:
                    pass
    finally:
        for handle in handles:
            handle.remove()
    for stats in found.values():
        for entry in stats.values():
            rows = torch.cat(entry["rows"])
            keep = torch.randperm(rows.shape[0], generator=generator)[:sample_rows]
            entry["rows"] = rows[keep]
    return [found[index] for index in layers]


def capture_layer(model, windows, layer: int, sample_rows: int = SAMPLE_ROWS, seed: int = 0) -> LayerStats:
    """Input statistics of every linear layer of decoder layer ``layer`` over ``windows`` (a list of
    1-D id tensors); the forward pass stops after that layer."""
    return capture_layers(model, windows, [layer], sample_rows, seed)[0]


def quantize_weights(model, bits: int, method: str = "rtn", symmetric: bool = True, windows=None,
                     damp: float = 0.01, act_order: bool = True, log=None) -> dict:
    """Quantize every linear layer of every decoder layer in place (the embeddings and the head stay
    in floating point, as in QuaRot and SpinQuant); returns {"seconds", "layers"}."""
    if method not in ("rtn", "gptq"):
        raise ValueError(f"--method: unknown weight quantizer {method!r}; choose rtn or gptq")
    if method == "gptq" and not windows:
        raise ValueError("GPTQ needs calibration windows (--calib-windows >= 1)")
    t0 = time.perf_counter()
    blocks = models.decoder_layers(model)
    for index in range(len(blocks)):
        stats = capture_layer(model, windows, index) if method == "gptq" else None
        for name in LINEARS:
            linear = models.projection(model, index, name)
            w = linear.weight.detach()
            if method == "gptq":
                q = gptq_quantize(w, stats[name]["hessian"], bits, symmetric, damp, act_order)
            else:
                q = quantize_weight(w, bits, symmetric)
            with torch.no_grad():
                linear.weight.copy_(q)
        if log and method == "gptq":
            log(f"GPTQ layer {index + 1}/{len(blocks)} ({time.perf_counter() - t0:.0f} s)")
    return {"seconds": time.perf_counter() - t0, "layers": len(blocks)}


def rotation_loss(Q, layer_weights, layer_stats, wbits: int, abits: int, symmetric: bool = True, rows=None):
    r"""The loss of the module doc for the layers given: ``layer_weights`` a list of {projection: W}
    and ``layer_stats`` of matching :class:`LayerStats`. ``rows`` maps a projection to the output
    channels scored this step (all when None): each channel has its own grid, so a subset of them
    is an unbiased estimate of the whole. The error is measured in the rotated basis, where it has
    the same size: :math:`\operatorname{tr}(E H E^T)` with :math:`E Q = \hat Q(W Q) - W Q` for a
    reader, :math:`E = Q (\hat Q(Q^T W) - Q^T W)` for a writer."""
    total = Q.new_zeros(())
    for weights, stats in zip(layer_weights, layer_stats):
        for name, W in weights.items():
            pick = None if rows is None else rows.get(name)
            H = stats[name]["hessian_f"]
            if name in READERS:
                rotated = (W if pick is None else W[pick]) @ Q
                E = (quantize_weight(rotated, wbits, symmetric, straight_through=True) - rotated) @ Q.t()
            else:
                rotated = (Q if pick is None else Q[:, pick]).t() @ W
                E = quantize_weight(rotated, wbits, symmetric, straight_through=True) - rotated
            share = 1.0 if pick is None else W.shape[0] / len(pick)
            total = total + share * torch.einsum("oi,ij,oj->", E, H, E) / stats[name]["scale"]
        if abits < 16:
            for name in ("q_proj", "gate_proj"):
                x = stats[name]["rows"]
                err = quantize_activation(x @ Q, abits, straight_through=True) @ Q.t() - x
                total = total + err.pow(2).sum() / x.pow(2).sum().clamp_min(1e-12)
    return total / max(1, len(layer_weights))


def _checkpoint_state(rotation, optimiser, step, history, settings) -> dict:
    opt = optimiser.state_dict()
    return {"rotation": {k: v.detach().clone() for k, v in rotation.state_dict().items()},
            "optimiser": {"state": {str(k): v for k, v in opt["state"].items()}, "param_groups": opt["param_groups"]},
            "step": step, "history": history, "settings": settings}


def _restore(path, rotation, optimiser, settings):
    state = _io.load_state(path, fix="delete it to start the calibration again", pickles=False)
    if state.get("settings") != settings:
        raise ValueError(f"{path} holds a calibration of other settings ({state.get('settings')}); delete it or give "
                         "another --out to start this one")
    rotation.load_state_dict(state["rotation"])
    opt = state["optimiser"]
    optimiser.load_state_dict({"state": {int(k): v for k, v in opt["state"].items()},
                               "param_groups": opt["param_groups"]})
    return int(state["step"]), list(state["history"])


def train_rotation(rotation, layer_weights: list, layer_stats: list, wbits: int, abits: int = 16, steps: int = 20,
                   lr: float = 1e-2, layers_per_step: int = 4, seed: int = 0, symmetric: bool = True,
                   rows_per_step: int | None = 64,
                   checkpoint: str | None = None, checkpoint_every: int = 5, log=None, stop_after: int | None = None):
    """Learn ``rotation``'s parameters (module doc). ``layer_weights[i]`` maps each projection of
    decoder layer i to its (folded, R2- and online-rotated) weight, ``layer_stats[i]`` is
    :func:`capture_layer`'s result for it. ``stop_after``: return after that many steps of this
    call (an interruption, for tests). Returns {"history", "seconds", "steps", "resumed_from"}."""
    params = [p for p in rotation.parameters() if p.requires_grad]
    if not params:
        return {"history": [], "seconds": 0.0, "steps": 0, "resumed_from": 0}
    dtype = rotation.base.dtype
    for stats in layer_stats:
        for entry in stats.values():
            if "hessian_f" not in entry:
                entry["hessian_f"] = (entry["hessian"] / max(entry["count"], 1)).to(dtype)
                entry["rows"] = entry["rows"].to(dtype)
    for weights, stats in zip(layer_weights, layer_stats):
        for name, W in weights.items():
            stats[name]["scale"] = float(torch.einsum("oi,ij,oj->", W.double(), stats[name]["hessian_f"].double(),
                                                      W.double())) or 1.0
    optimiser = torch.optim.Adam(params, lr=lr)
    settings = {"family": rotation.family, "width": rotation.width, "seed": seed, "steps": steps, "lr": lr,
                "layers_per_step": layers_per_step, "rows_per_step": rows_per_step, "wbits": wbits, "abits": abits,
                "symmetric": symmetric}
    start, history = 0, []
    if checkpoint and os.path.exists(checkpoint):
        start, history = _restore(checkpoint, rotation, optimiser, settings)
    t0 = time.perf_counter()
    count = len(layer_weights)
    done = 0
    for step in range(start, steps):
        if stop_after is not None and done >= stop_after:
            break
        draw = np.random.default_rng([seed, step])
        pick = draw.choice(count, size=min(layers_per_step, count), replace=False)
        rows = None if rows_per_step is None else {
            name: torch.as_tensor(np.sort(draw.choice(W.shape[0], min(rows_per_step, W.shape[0]), replace=False)))
            for name, W in layer_weights[0].items()}
        optimiser.zero_grad(set_to_none=True)
        Q = rotation.matrix()
        loss = rotation_loss(Q, [layer_weights[i] for i in pick], [layer_stats[i] for i in pick], wbits, abits,
                             symmetric, rows)
        loss.backward()
        optimiser.step()
        history.append(float(loss.detach()))
        done += 1
        if log:
            log(f"{rotation.family} step {step + 1}/{steps}: loss {history[-1]:.5f}")
        if checkpoint and ((step + 1) % checkpoint_every == 0 or step + 1 == steps):
            _io.save_state(checkpoint, _checkpoint_state(rotation, optimiser, step + 1, history, settings))
    return {"history": history, "seconds": time.perf_counter() - t0, "steps": len(history), "resumed_from": start}
