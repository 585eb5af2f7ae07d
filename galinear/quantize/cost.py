"""Run-time cost of the online rotations (:func:`online_cost`), measured side by side with the layers
they precede; ``benchmarks/bench_quantize_rotation.py`` times the same contenders through these helpers.

A CPU cost measurement: every product is timed on the CPU, whatever device the model's weights are on
(a model on a GPU lends CPU copies of the pieces timed: a weight, the first decoder layer)."""
from __future__ import annotations

import copy
import time

import torch

from galinear.lm import models
from galinear.quantize import fusion
from galinear.quantize.hadamard import apply_hadamard, hadamard_factors
from galinear.quantize.rotations import FAMILIES, Rotation

__all__ = ["online_cost"]


def _on_cpu(part):
    """``part`` (a tensor or a module) itself when it is on the CPU, else a CPU copy of it."""
    if torch.is_tensor(part):
        return part if part.device.type == "cpu" else part.detach().cpu()
    if all(t.device.type == "cpu" for t in list(part.parameters()) + list(part.buffers())):
        return part
    part = copy.deepcopy(part).cpu()
    for module in part.modules():  # plain tensor attributes too (the KV quantizer's R3)
        for name, value in list(vars(module).items()):
            if torch.is_tensor(value):
                setattr(module, name, value.cpu())
    return part


def online_cost(model, tokens: int = 256, repeats: int = 20) -> dict:
    """Milliseconds on the CPU (``"device"``; module doc) of the online Hadamard before down_proj, of a
    fast Walsh-Hadamard transform of the next power of two, of down_proj itself and of one decoder
    layer, on ``tokens`` rows, side by side.

    For a model whose R1 is applied online (:func:`galinear.quantize.fusion.r1_mode`), also
    ``"online_r1"``: the milliseconds of one application of each family's online R1 at the hidden
    width (:class:`~galinear.quantize.fusion.OnlineRotation`: the fast Hadamard transform, the same
    followed by the chunk blocks for butterfly and rotor, a dense product for Cayley, and the dense
    product for every family side by side), next to the layers it precedes (q, k and v after
    input_layernorm, gate and up after pre_feedforward_layernorm); it runs twice a decoder layer.

    ``"r3"``: R3, applied online when the KV cache is quantized (:mod:`galinear.quantize.attention`):
    the milliseconds of the per-head products of the queries and of the keys (``tokens`` x heads
    and ``tokens`` x key-value heads rows of head_dim) with the head_dim x head_dim matrix, and of
    the same by the fast Hadamard transform (:func:`~galinear.quantize.hadamard.apply_hadamard`), next
    to q_proj and k_proj; it runs once a decoder layer."""
    from galinear.nn.functional import fwht

    width = models.projection(model, 0, "down_proj").in_features
    x = torch.randn(tokens, width)
    power = 1 << (width - 1).bit_length()
    xp = torch.randn(tokens, power)
    down_weight = _on_cpu(models.projection(model, 0, "down_proj").weight)

    def timed(fn):
        with torch.no_grad():
            fn()
            t0 = time.perf_counter()
            for _ in range(repeats):
                fn()
        return 1000 * (time.perf_counter() - t0) / repeats

    out = {"device": "cpu", "tokens": tokens, "width": width, "online_hadamard_ms": timed(lambda: apply_hadamard(x)),
           "fwht_ms": timed(lambda: fwht(xp)), "fwht_width": power,
           "down_proj_ms": timed(lambda: torch.nn.functional.linear(x, down_weight)),
           "layer_ms": timed(_first_layer_call(model, tokens))}
    if fusion.r1_mode(model) == "online":
        out["online_r1"] = _online_r1_cost(model, tokens, timed)
    out["r3"] = _r3_cost(model, tokens, timed)
    return out


def _first_layer_call(model, tokens: int):
    """A call of ``model``'s first decoder layer on ``tokens`` random rows, its rotary table included
    (Gemma-3 keeps one per attention kind: the first layer's)."""
    import inspect

    block = _on_cpu(models.decoder_layers(model)[0])
    h = torch.randn(1, tokens, model.config.hidden_size)
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    rotary = None if rotary is None else _on_cpu(rotary)
    layer_types = getattr(model.config, "layer_types", None)
    kind = () if rotary is None or not layer_types or "layer_type" not in inspect.signature(rotary.forward).parameters else (
        layer_types[0],)

    def layer():
        position = torch.arange(tokens)[None]
        emb = rotary(h, position, *kind) if rotary is not None else None
        return block(h, position_embeddings=emb, position_ids=position)

    return layer


def _r3_cost(model, tokens: int, timed) -> dict:
    """R3's side of :func:`online_cost` (its doc). ``timed``: fn -> what is recorded for it (here its
    milliseconds; ``benchmarks/bench_quantize_rotation.py`` keeps the fn, to time it side by side)."""
    hd = fusion.head_dim(model)
    heads = model.config.num_attention_heads
    kv_heads = getattr(model.config, "num_key_value_heads", None) or heads
    q, k = torch.randn(1, heads, tokens, hd), torch.randn(1, kv_heads, tokens, hd)
    R = Rotation("hadamard", hd, 0).matrix()
    x = torch.randn(tokens, model.config.hidden_size)
    weights = [_on_cpu(models.projection(model, 0, name).weight) for name in ("q_proj", "k_proj")]
    try:
        hadamard_factors(hd)
        fast = timed(lambda: (apply_hadamard(q), apply_hadamard(k)))
    except ValueError:  # no Hadamard order covers head_dim: only the dense product is timed
        fast = None
    return {"tokens": tokens, "head_dim": hd, "heads": heads, "kv_heads": kv_heads, "per_layer": 1,
            "dense_ms": timed(lambda: (q @ R, k @ R)), "fast_ms": fast,
            "qk_proj_ms": timed(lambda: [torch.nn.functional.linear(x, w) for w in weights])}


def _online_r1_cost(model, tokens: int, timed) -> dict:
    """The online R1's side of :func:`online_cost` (its doc); ``timed`` as in :func:`_r3_cost`."""
    hidden = model.config.hidden_size
    x = torch.randn(tokens, hidden)

    def linears(*names):
        weights = [_on_cpu(models.projection(model, 0, name).weight) for name in names]
        return timed(lambda: [torch.nn.functional.linear(x, w) for w in weights])

    families, how, dense = {}, {}, {}
    for family in FAMILIES[1:]:
        rotation = Rotation(family, hidden, 0)
        with torch.no_grad():
            for p in rotation.parameters():
                p.normal_(0.0, 0.1)  # away from the start, where the learned factor is the identity
        online = fusion.online_rotation(rotation)
        product = fusion.OnlineRotation(online.matrix)
        families[family] = timed(lambda online=online: online(x))  # bound now: ``timed`` may keep the fn
        how[family] = online.kind
        dense[family] = timed(lambda product=product: product(x))
    return {"tokens": tokens, "width": hidden, "per_layer": 2, "ms": families, "route": how, "dense_ms": dense,
            "qkv_proj_ms": linears("q_proj", "k_proj", "v_proj"), "gate_up_proj_ms": linears("gate_proj", "up_proj")}

