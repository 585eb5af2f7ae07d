r"""Calibration: what the quantizers and the learned rotations see of the calibration text.

- :func:`capture_layer` runs the model on the calibration windows up to one decoder layer and
  returns, for each of its linear layers, the Hessian :math:`X^T X` of its inputs (float64) and a
  sample of input rows; the pass stops after that layer.
- :func:`quantize_weights` quantizes every linear layer of every decoder layer, RTN or GPTQ; GPTQ
  goes layer by layer, each layer's Hessians taken with the layers before it already quantized.
- :func:`distill_rotation` learns R1 of a learned family by distillation (``--objective distill``,
  the default): each step, on one calibration window drawn by (seed, step), the mean over tokens of
  :math:`\mathrm{KL}(p \,\|\, \hat p)` between the next-token distribution p of the original model
  and :math:`\hat p` of the model with the rotation applied and every decoder matrix rounded to its
  grid (straight-through rounding; the activations and the KV cache, after RoPE, too when they are
  quantized). The rotated weights are taken as functions of the learned factor L (Q = Q_0 L): the
  products with the Hadamard :math:`Q_0` once, L (block-diagonal for the butterfly and rotor
  families) per step. At
  the end the calibration KL over every window is measured for the trained rotation and for its
  start (:math:`Q_0`), and the better is kept (the report says which).
- :func:`train_rotation` learns R1 against the quantized layers' expected output error
  (``--objective error``): rounding to a grid of step s adds an error of variance
  :math:`s^2 / 12` to each weight, independent of the rotation, so for a layer with weight W and
  input Hessian H the expected :math:`\operatorname{tr}(E H E^T)` is
  :math:`\sum_r s_r^2 \operatorname{tr} H / 12` with :math:`s_r = \max_i |(W Q)_{ri}| / ((2^b-1)/2)`
  for a reader (rows of :math:`Q^T W` for a writer): the rotation acts only through each row's largest
  magnitude, which the loss takes smoothly (:func:`smooth_max`, an :math:`\ell_p` norm) and divides
  by :math:`\operatorname{tr}(W H W^T)`; with quantized activations it adds the same expected
  relative error of the per-token quantized stream rows. Each step draws ``layers_per_step`` decoder
  layers from a generator seeded by (seed, step).
- Both run Adam (:func:`galinear.quantize.optimise.adam`); distillation can instead run steepest
  descent with a line search on every calibration window each step (``optimizer="descent"``,
  :func:`galinear.quantize.optimise.descend`). Every ``checkpoint_every`` steps they write the
  rotation, the optimiser state and the loss history atomically; a rerun resumes from it and ends
  bit for bit where an uninterrupted run ends.

The gradients of the rounding are straight-through estimates (the identity's), not the gradient of
the forward: what is checked against central differences is each family's map from its parameters
to Q (``tests/quantize/test_learned_rotations.py``).
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import torch
from torch.func import functional_call

from galinear.lm import models
from galinear.quantize import attention, fusion, optimise
from galinear.quantize.fusion import READERS, WRITERS
from galinear.quantize.gptq import gptq_quantize
from galinear.quantize.quantizers import (ACTIVATION_BITS, check_bits, check_group_size, quantize_activation,
                                          quantize_weight)
from galinear.quantize.rotations import times_stages

__all__ = ["LINEARS", "capture_layer", "capture_layers", "quantize_weights", "train_rotation", "distill_rotation",
           "rotation_loss", "smooth_max", "LayerStats"]

LINEARS = READERS + WRITERS
#: Input rows kept per linear layer for the clipping search and the activation term.
SAMPLE_ROWS = 256


class _Stop(Exception):
    pass


class LayerStats(dict):
    """{projection: {"hessian": (in, in) float64, "rows": (<= SAMPLE_ROWS, in), "count": tokens}}."""


def capture_layers(model, windows, layers, sample_rows: int = SAMPLE_ROWS, seed: int = 0) -> list:
    """:class:`LayerStats` of every decoder layer in ``layers``, in one forward pass per window (a
    list of 1-D id tensors, moved to the model's device); the pass stops after the last of them. The
    statistics are on the device of the inputs; the rows are drawn by a CPU generator, the same on any device."""
    blocks = models.decoder_layers(model)
    layers = list(layers)
    last = max(layers)
    found = {index: LayerStats() for index in layers}
    handles = []
    generator = torch.Generator().manual_seed(seed * 1000 + min(layers))

    def hook(stats, name, stop):
        def record(module, args):
            x = args[0].detach().reshape(-1, args[0].shape[-1])
            entry = stats.setdefault(name, {"hessian": torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64,
                                                                   device=x.device), "rows": [], "count": 0})
            entry["hessian"] += x.double().t() @ x.double()
            entry["count"] += x.shape[0]
            pick = torch.randperm(x.shape[0], generator=generator)[:sample_rows]
            entry["rows"].append(x[pick.to(x.device)].float())
            if stop:
                raise _Stop
        return record

    for index in layers:
        for name in LINEARS:
            module = getattr(models.holder(blocks[index], name), name)
            handles.append(module.register_forward_pre_hook(hook(found[index], name,
                                                                 index == last and name == "down_proj")))
    device = models.input_device(model)
    try:
        with torch.no_grad():
            for ids in windows:
                try:
                    model(input_ids=ids.reshape(1, -1).to(device), use_cache=False)
                except _Stop:
                    pass
    finally:
        for handle in handles:
            handle.remove()
    for stats in found.values():
        for entry in stats.values():
            rows = torch.cat(entry["rows"])
            keep = torch.randperm(rows.shape[0], generator=generator)[:sample_rows]
            entry["rows"] = rows[keep.to(rows.device)]
    return [found[index] for index in layers]


def capture_layer(model, windows, layer: int, sample_rows: int = SAMPLE_ROWS, seed: int = 0) -> LayerStats:
    """Input statistics of every linear layer of decoder layer ``layer`` over ``windows`` (a list of
    1-D id tensors); the forward pass stops after that layer."""
    return capture_layers(model, windows, [layer], sample_rows, seed)[0]


def quantize_weights(model, bits: int, method: str = "rtn", symmetric: bool = True, windows=None,
                     damp: float = 0.01, act_order: bool = True, log=None, group_size: int | None = None) -> dict:
    """Quantize every linear layer of every decoder layer in place (the embeddings and the head stay
    in floating point, as in QuaRot and SpinQuant), one grid per output channel or per run of
    ``group_size`` input columns of each; returns {"seconds", "layers"}."""
    if method not in ("rtn", "gptq"):
        raise ValueError(f"--method: unknown weight quantizer {method!r}; choose rtn or gptq")
    if method == "gptq" and not windows:
        raise ValueError("GPTQ needs calibration windows (--calib-windows >= 1)")
    t0 = time.perf_counter()
    blocks = models.decoder_layers(model)
    if method == "gptq":
        _warn_if_starved(model, windows)
    for index in range(len(blocks)):
        stats = capture_layer(model, windows, index) if method == "gptq" else None
        for name in LINEARS:
            linear = models.projection(model, index, name)
            w = linear.weight.detach()
            if method == "gptq":
                q = gptq_quantize(w, stats[name]["hessian"], bits, symmetric, damp, act_order, group_size=group_size)
            else:
                q = quantize_weight(w, bits, symmetric, group_size=group_size)
            with torch.no_grad():
                linear.weight.copy_(q)
        if log and method == "gptq":
            log(f"GPTQ layer {index + 1}/{len(blocks)} ({time.perf_counter() - t0:.0f} s)")
    return {"seconds": time.perf_counter() - t0, "layers": len(blocks)}


def _warn_if_starved(model, windows) -> None:
    """A warning when GPTQ's Hessians :math:`X^T X` come from fewer calibration tokens than the widest
    decoder layer input: a Hessian of rank under its width, which GPTQ's updates then fit instead of
    the text (at W2 on SmolLM2 it did worse than round-to-nearest; docs/results.md)."""
    tokens = sum(int(w.numel()) for w in windows)
    widest = max(int(models.projection(model, i, name).weight.shape[1])
                 for i in range(len(models.decoder_layers(model))) for name in LINEARS)
    if tokens < widest:
        length = max(int(w.numel()) for w in windows)
        warnings.warn(f"GPTQ calibrates on {tokens} tokens, fewer than the widest layer input ({widest}): its "
                      f"Hessians are singular and it fits the calibration rows rather than the text; give "
                      f"--calib-windows {-(-4 * widest // length)} or more", UserWarning, stacklevel=3)


def smooth_max(v: torch.Tensor, p: float) -> torch.Tensor:
    r"""The :math:`\ell_p` norm of each row of ``v`` (..., n), a smooth upper bound of its largest
    magnitude (at most :math:`n^{1/p}` times it), computed on the rows divided by their (detached)
    largest magnitude so that no power under- or overflows."""
    top = v.detach().abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(v.dtype).tiny)
    return top.squeeze(-1) * (v / top).abs().pow(p).sum(dim=-1).pow(1.0 / p)


def weight_levels(bits: int) -> float:
    r"""Grid steps per largest magnitude, :math:`(2^b - 1) / 2`: a row's step is at most
    :math:`\max|w| / \text{levels}` (exactly that on a symmetric grid; an asymmetric grid spans
    :math:`\max w - \min w \le 2 \max|w|`, so the loss bounds it)."""
    return (2 ** bits - 1) / 2


def rotation_loss(Q, layer_weights, layer_stats, wbits: int, abits: int, symmetric: bool = True, rows=None,
                  p: float = 16.0, rotated=None):
    r"""The expected relative output error of the quantized layers given (module doc), averaged over
    the layers: ``layer_weights`` a list of {projection: W} and ``layer_stats`` of matching
    :class:`LayerStats` (each entry with ``"trace"``, :math:`\operatorname{tr} H`, and ``"scale"``,
    :math:`\operatorname{tr}(W H W^T)`). ``rows`` maps a projection to the output channels scored
    this step (all when None; a subset is an unbiased estimate, each channel having its own grid);
    ``rotated``: the projections the rotation reaches (every reader and writer when None); ``p``:
    the order of the smooth maximum (:func:`smooth_max`)."""
    total = Q.new_zeros(())
    levels = weight_levels(wbits)
    for weights, stats in zip(layer_weights, layer_stats):
        for name, W in weights.items():
            if rotated is not None and name not in rotated:
                continue
            pick = None if rows is None else rows.get(name)
            if name in READERS:
                V = (W if pick is None else W[pick]) @ Q
            else:
                V = (Q if pick is None else Q[:, pick]).t() @ W
            share = 1.0 if pick is None else W.shape[0] / len(pick)
            step = smooth_max(V, p) / levels
            total = total + share * step.pow(2).sum() * stats[name]["trace"] / (12.0 * stats[name]["scale"])
        if abits < 16:
            half = 2 ** (abits - 1) - 1
            for name in ("q_proj", "gate_proj"):
                x = stats[name]["rows"]
                step = smooth_max(x @ Q, p) / half
                total = total + (x.shape[1] * step.pow(2) / (12.0 * x.pow(2).sum(dim=1).clamp_min(1e-12))).mean()
    return total / max(1, len(layer_weights))


def train_rotation(rotation, layer_weights: list, layer_stats: list, wbits: int, abits: int = 16, steps: int = 20,
                   lr: float = 1e-2, layers_per_step: int = 4, seed: int = 0, symmetric: bool = True,
                   rows_per_step: int | None = 64, p: float = 16.0, rotated=None,
                   checkpoint: str | None = None, checkpoint_every: int = 5, log=None, stop_after: int | None = None):
    """Learn ``rotation``'s parameters (module doc). ``layer_weights[i]`` maps each projection of
    decoder layer i to its (folded, R2- and online-rotated) weight, ``layer_stats[i]`` is
    :func:`capture_layer`'s result for it. ``stop_after``: return after that many steps of this
    call (an interruption, for tests). The rotation moves to the weights' device (in place), and the
    statistics with it. Returns {"history", "seconds", "steps", "resumed_from"}."""
    if not any(p.requires_grad for p in rotation.parameters()):
        return {"history": [], "seconds": 0.0, "steps": 0, "resumed_from": 0}
    dtype = rotation.base.dtype
    if layer_weights and layer_weights[0]:
        rotation.to(next(iter(layer_weights[0].values())).device)
    for weights, stats in zip(layer_weights, layer_stats):
        for name, W in weights.items():
            entry = stats[name]
            H = entry["hessian"].to(device=W.device, dtype=torch.float64) / max(entry["count"], 1)
            entry["trace"] = float(torch.trace(H))
            entry["scale"] = float(torch.einsum("oi,ij,oj->", W.double(), H, W.double())) or 1.0
            entry["rows"] = entry["rows"].to(device=W.device, dtype=dtype)
    settings = {"objective": "error", "family": rotation.family, "width": rotation.width,
                "layers": rotation.layers, "seed": seed,
                "steps": steps, "lr": lr, "layers_per_step": layers_per_step, "rows_per_step": rows_per_step,
                "wbits": wbits, "abits": abits, "symmetric": symmetric, "p": p,
                "rotated": None if rotated is None else sorted(rotated)}
    count = len(layer_weights)

    def loss_at(step: int) -> torch.Tensor:
        draw = np.random.default_rng([seed, step])
        pick = draw.choice(count, size=min(layers_per_step, count), replace=False)
        rows = None if rows_per_step is None else {
            name: torch.as_tensor(np.sort(draw.choice(W.shape[0], min(rows_per_step, W.shape[0]), replace=False)),
                                  device=W.device)
            for name, W in layer_weights[0].items()}
        return rotation_loss(rotation.matrix(), [layer_weights[i] for i in pick], [layer_stats[i] for i in pick],
                             wbits, abits, symmetric, rows, p, rotated)

    return optimise.adam(rotation, loss_at, settings, steps, lr, checkpoint, checkpoint_every, log, stop_after)


# ------------------------------------------------------------------------------------ distillation
class _RotatedWeights:
    """The prepared model's weights as functions of the learned factor L of ``rotation`` (Q = Q_0 L):
    the products with :math:`Q_0` are taken once, and L, for the butterfly and rotor families a
    product of block-diagonal stages (:meth:`~galinear.quantize.rotations.Rotation.learned_stages`),
    is applied per step by one batched chunk product per stage and matrix."""

    def __init__(self, model, rotation, wbits: int, symmetric: bool, group_size: int | None = None):
        self.rotation, self.wbits, self.symmetric, self.group_size = rotation, wbits, symmetric, group_size
        self.mode = fusion.r1_mode(model)
        names = {id(p): n for n, p in model.named_parameters()}
        names.update({id(b): n for n, b in model.named_buffers()})
        dtype = rotation.base.dtype
        Q0 = rotation.base.double()
        self.fixed = []  # (parameter name, kind, Q_0-rotated tensor, quantized)
        rotated = fusion.r1_projections(model)
        with torch.no_grad():
            for index in range(len(models.decoder_layers(model))):
                for name in LINEARS:
                    linear = models.projection(model, index, name)
                    key = names[id(linear.weight)]
                    W = linear.weight.double()
                    if name not in rotated:
                        self.fixed.append((key, "plain", W.to(dtype), True))
                    elif name in READERS:
                        self.fixed.append((key, "reader", (W @ Q0).to(dtype), True))
                    else:
                        self.fixed.append((key, "writer", (Q0.t() @ W).to(dtype), True))
                        if linear.bias is not None:
                            self.fixed.append((names[id(linear.bias)], "reader", (linear.bias.double() @ Q0).to(dtype),
                                               False))
            if self.mode == "fused":
                embed, head = model.get_input_embeddings(), model.get_output_embeddings()
                self.fixed.append((names[id(embed.weight)], "reader", (embed.weight.double() @ Q0).to(dtype), False))
                self.fixed.append((names[id(head.weight)], "reader", (head.weight.double() @ Q0).to(dtype), False))
        self.norms = [] if self.mode == "fused" else fusion.read_norms(model)

    @staticmethod
    def _times(V: torch.Tensor, kind: str, L, stages) -> torch.Tensor:
        if kind == "plain":
            return V
        if kind == "writer":  # L^T V = (V^T L)^T
            return _RotatedWeights._times(V.t(), "reader", L, stages).t()
        return V @ L if stages is None else times_stages(V, stages)  # a reader's V L, a vector's v L

    def parameters(self) -> dict:
        """{parameter name: tensor} of the rotated model, the decoder's matrices quantized with
        straight-through rounding (not rounded when ``wbits`` is None)."""
        stages = self.rotation.learned_stages()
        L = None if stages is not None else self.rotation.learned()
        out = {}
        for key, kind, V, quantized in self.fixed:
            rotated = self._times(V, kind, L, stages)
            out[key] = quantize_weight(rotated, self.wbits, self.symmetric, straight_through=True,
                                       group_size=self.group_size) if quantized and self.wbits is not None else rotated
        return out


def distill_rotation(model, rotation, windows: list, wbits: int, abits: int = 16, steps: int = 20, lr: float = 1e-2,
                     seed: int = 0, symmetric: bool = True, tokens_per_step: int | None = None,
                     checkpoint: str | None = None, checkpoint_every: int = 5, log=None,
                     stop_after: int | None = None, kvbits: int = 16, r3=None, optimizer: str = "adam",
                     group_size: int | None = None) -> dict:
    r"""Learn ``rotation``'s parameters by distillation (module doc): each step, on one calibration
    window drawn by (seed, step) (its first ``tokens_per_step`` tokens when given), the mean over
    tokens of :math:`\mathrm{KL}(p \,\|\, \hat p)` between the next-token distribution p of
    ``model`` (prepared: norms folded, R2 and the online Hadamard in place, R1 not applied) and
    :math:`\hat p` of the same model with R1 = ``rotation`` applied and every decoder matrix
    quantized (straight-through rounding), with the activations quantized per token when
    ``abits < 16``, and the KV cache per token and head after RoPE when ``kvbits < 16``, Q and K
    rotated per head by ``r3`` after RoPE when given (:mod:`galinear.quantize.attention`; ``r3``
    changes nothing with the cache in floating point and is then not used), both with
    straight-through rounding too; the weights' grids are those of :func:`quantize_weights` with
    ``group_size``. ``optimizer="descent"`` follows instead the mean of that KL over
    every window (each cut to ``tokens_per_step`` tokens), the same tokens every step
    (:func:`galinear.quantize.optimise.descend`). ``model`` is left unchanged; the rotation moves to
    its device (in place), and each window as it is read. Returns as :func:`train_rotation` does
    (with ``"line_search"`` for the descent)."""
    check_bits(kvbits, "KV cache", ACTIVATION_BITS, "--kvbits")
    if optimizer not in optimise.OPTIMIZERS:
        raise ValueError(f"--optimizer: unknown optimizer {optimizer!r}; choose {' or '.join(optimise.OPTIMIZERS)}")
    if not any(p.requires_grad for p in rotation.parameters()):
        return {"history": [], "seconds": 0.0, "steps": 0, "resumed_from": 0}
    device = models.input_device(model)
    rotation.to(device)
    weights = _RotatedWeights(model, rotation, wbits, symmetric, check_group_size(group_size))
    settings = {"objective": "distill", "family": rotation.family, "width": rotation.width,
                "layers": rotation.layers, "seed": seed,
                "steps": steps, "lr": lr, "windows": len(windows), "tokens_per_step": tokens_per_step,
                "wbits": wbits, "abits": abits, "symmetric": symmetric}
    if kvbits < 16:  # absent at 16 bits, so a checkpoint of that case from before this setting still matches
        settings.update(kvbits=kvbits, r3=r3 is not None)
        if attention.kv_quantizer(model) is not None:
            raise ValueError("distill_rotation quantizes the KV cache itself; give it a model without one installed")
        attention.remove_kv_quantizer(attention.install_kv_quantizer(model, kvbits, r3))  # bad input fails here
    if optimizer != "adam":  # absent for Adam, so checkpoints from before this setting still match
        settings.update(optimizer=optimizer, halvings=optimise.HALVINGS)
    if group_size is not None:  # absent for one grid per channel, for the same reason
        settings.update(group_size=group_size)
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    targets = {}  # the original's log-probabilities per window, computed once

    def kl(index: int, tokens: int | None) -> torch.Tensor:
        ids = windows[index].reshape(1, -1).to(device)
        if index not in targets:
            with torch.no_grad():
                targets[index] = torch.log_softmax(model(input_ids=ids, use_cache=False).logits.float(), dim=-1)
        target = targets[index]
        if tokens:
            ids, target = ids[:, :tokens], target[:, :tokens]
        Q = rotation.matrix() if weights.norms else None  # online R1 only: fused, Q is in the weights
        handles = [norm.register_forward_hook(lambda module, args, out, Q=Q: out @ Q.to(out.dtype))
                   for norm in weights.norms]
        if abits < 16:
            handles += [models.projection(model, i, name).register_forward_pre_hook(
                lambda module, args: (quantize_activation(args[0], abits, straight_through=True),) + tuple(args[1:]))
                for i in range(len(models.decoder_layers(model))) for name in LINEARS]
        try:
            if kvbits < 16:
                attention.install_kv_quantizer(model, kvbits, r3, straight_through=True)
            logits = functional_call(model, weights.parameters(), (), {"input_ids": ids, "use_cache": False}).logits
        finally:
            if kvbits < 16:
                attention.remove_kv_quantizer(model)
            for handle in handles:
                handle.remove()
        student = torch.log_softmax(logits.float(), dim=-1)
        return (target.exp() * (target - student)).sum(-1).mean()

    def loss_at(step: int) -> torch.Tensor:
        draw = np.random.default_rng([seed, step])
        return kl(int(draw.integers(len(windows))), tokens_per_step)

    def every_window() -> torch.Tensor:
        return sum(kl(i, tokens_per_step) for i in range(len(windows))) / len(windows)

    def calibration_kl() -> float:
        with torch.no_grad():
            return float(sum(kl(i, None) for i in range(len(windows))) / len(windows))

    try:
        if optimizer == "descent":
            result = optimise.descend(rotation, every_window, settings, steps, lr, checkpoint, checkpoint_every, log,
                                      stop_after)
            finished = result["line_search"]["stopped"] or result["steps"] + result["resumed_from"] >= steps
        else:
            result = optimise.adam(rotation, loss_at, settings, steps, lr, checkpoint, checkpoint_every, log,
                                   stop_after)
            finished = result["steps"] + result["resumed_from"] >= steps
        if stop_after is None or finished:
            result.update(optimise.keep_better(rotation, calibration_kl, log))
        return result
    finally:
        for p in frozen:
            p.requires_grad_(True)
