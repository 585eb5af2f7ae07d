r"""Rotations fused into the weights of a Llama-family causal LM (QuaRot and SpinQuant's R1, R2, R4).

With every RMSNorm's scale folded into the linear layers that read its output, an RMSNorm commutes
with any orthogonal Q (it divides by the norm, which Q keeps). The residual stream can then be
rotated, x -> x Q, at no run-time cost (:func:`rotate_residual`, R1):

- the embeddings' rows: :math:`E \leftarrow E Q`;
- layers that read the stream (q, k, v, gate, up, the head): :math:`W \leftarrow W Q`;
- layers that write it (o, down): :math:`W \leftarrow Q^T W`.

Per attention head, the value vectors can be rotated by an orthogonal :math:`R_2` of the head's
width, undone in the columns of o_proj (:func:`rotate_heads`): :math:`W_v^{(g)} \leftarrow R_2^T
W_v^{(g)}` for each key-value head g and :math:`W_o^{(h)} \leftarrow W_o^{(h)} R_2` for each query
head h (the heads sharing a value head share :math:`R_2`).

The MLP's inner activation passes through SiLU and a product, so its rotation cannot be fused on
both sides: :func:`online_hadamard` multiplies down_proj's input by a normalised Hadamard matrix
:math:`H` at run time (a forward pre-hook; a fast Walsh-Hadamard transform and one small product,
:func:`galinear.quantize.hadamard.apply_hadamard`) and fuses :math:`H^T` into down_proj's weight.

Every step leaves the unquantized model's function unchanged up to float rounding
(``tests/quantize/test_fusion.py``). Supported families: those whose decoder layer is
``input_layernorm -> attention -> residual add -> post_attention_layernorm -> MLP -> residual add``
with RMSNorm(x) = weight * x / rms(x) (:data:`ARCHITECTURES`). Gemma-3 puts a second norm after
the attention and the MLP outputs, whose scale does not commute with a rotation of the stream; it is
refused until those norms are handled.
"""
from __future__ import annotations

import torch

from galinear.lm import models
from galinear.quantize.hadamard import apply_hadamard, hadamard_factors

__all__ = ["ARCHITECTURES", "check_architecture", "untie_head", "fold_norms", "rotate_residual", "rotate_heads",
           "online_hadamard", "remove_online_hadamard", "head_dim", "READERS", "WRITERS"]

#: model_type values whose layers have the structure the module doc describes.
ARCHITECTURES = ("llama", "mistral", "qwen2")
READERS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
WRITERS = ("o_proj", "down_proj")
_ONLINE = "_galinear_online_hadamard"


def check_architecture(model) -> str:
    """The model's type when its rotations can be fused, else ValueError naming it and the supported ones."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None) or type(model).__name__
    if kind not in ARCHITECTURES:
        why = (" (Gemma's norms after the attention and MLP outputs and its (1 + weight) scale do not commute with "
               "a rotation of the residual stream)" if str(kind).startswith("gemma") else "")
        raise ValueError(f"unknown architecture {kind!r} for rotation fusion{why}: galinear quantize fuses rotations "
                         f"into {', '.join(ARCHITECTURES)} models; use --rotation none with a model of another "
                         "family, or a Llama-family model (the default smollm2-135m)")
    for layer in models.decoder_layers(model):
        for name in READERS + WRITERS:
            if not isinstance(getattr(models.holder(layer, name), name, None), torch.nn.Linear):
                raise ValueError(f"{type(layer).__name__} has no nn.Linear {name}: the rotations are fused into "
                                 "separate q/k/v/o and gate/up/down projections")
    return kind


def head_dim(model) -> int:
    config = model.config
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _linear(model, layer: int, name: str) -> torch.nn.Linear:
    return models.projection(model, layer, name)


@torch.no_grad()
def _set(param: torch.nn.Parameter, value: torch.Tensor) -> None:
    param.copy_(value.to(param.dtype))


def untie_head(model) -> None:
    """Give the head its own weight when it shares the embeddings' (SmolLM2 does): the two are
    rotated differently once a norm scale is folded into the head."""
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    if head.weight is embed.weight or head.weight.data_ptr() == embed.weight.data_ptr():
        head.weight = torch.nn.Parameter(embed.weight.detach().clone(), requires_grad=False)
    model.config.tie_word_embeddings = False
    if hasattr(model, "_tied_weights_keys"):
        model._tied_weights_keys = []


@torch.no_grad()
def fold_norms(model) -> None:
    """Fold every RMSNorm's scale into the linear layers that read its output, leaving the scales at 1."""
    untie_head(model)
    blocks = models.decoder_layers(model)
    for index, block in enumerate(blocks):
        for norm, readers in ((block.input_layernorm, ("q_proj", "k_proj", "v_proj")),
                              (block.post_attention_layernorm, ("gate_proj", "up_proj"))):
            scale = norm.weight.double()
            for name in readers:
                linear = _linear(model, index, name)
                _set(linear.weight, linear.weight.double() * scale[None, :])
            norm.weight.fill_(1.0)
    final = model.model.norm
    head = model.get_output_embeddings()
    _set(head.weight, head.weight.double() * final.weight.double()[None, :])
    final.weight.fill_(1.0)


@torch.no_grad()
def rotate_residual(model, Q: torch.Tensor) -> None:
    """Rotate the residual stream by the orthogonal ``Q`` (width x width): x -> x Q (module doc).
    The norms must be folded first (:func:`fold_norms`)."""
    Q = Q.detach().double()
    embed = model.get_input_embeddings()
    _set(embed.weight, embed.weight.double() @ Q)
    for index in range(len(models.decoder_layers(model))):
        for name in READERS:
            linear = _linear(model, index, name)
            _set(linear.weight, linear.weight.double() @ Q)
        for name in WRITERS:
            linear = _linear(model, index, name)
            _set(linear.weight, Q.t() @ linear.weight.double())
            if linear.bias is not None:
                _set(linear.bias, linear.bias.double() @ Q)
    head = model.get_output_embeddings()
    _set(head.weight, head.weight.double() @ Q)


@torch.no_grad()
def rotate_heads(model, R2) -> None:
    """Rotate every head's value vectors by ``R2`` (head_dim x head_dim, or one per layer) and undo
    it in o_proj's columns (module doc)."""
    hd = head_dim(model)
    for index in range(len(models.decoder_layers(model))):
        R = (R2[index] if isinstance(R2, (list, tuple)) else R2).detach().double()
        v, o = _linear(model, index, "v_proj"), _linear(model, index, "o_proj")
        groups = v.out_features // hd
        wv = v.weight.double().reshape(groups, hd, -1)
        _set(v.weight, torch.einsum("ji,gjc->gic", R, wv).reshape(v.weight.shape))
        if v.bias is not None:
            _set(v.bias, (v.bias.double().reshape(groups, hd) @ R).reshape(-1))
        heads = o.in_features // hd
        wo = o.weight.double().reshape(o.out_features, heads, hd)
        _set(o.weight, torch.einsum("ohj,ji->ohi", wo, R).reshape(o.weight.shape))


def _hadamard_hook(module, args):
    return (apply_hadamard(args[0]),) + tuple(args[1:])


@torch.no_grad()
def online_hadamard(model) -> int:
    """The online rotation before every down_proj: H^T fused into the weight, H applied to the input
    at run time by a forward pre-hook. Returns the MLP width it rotates."""
    width = _linear(model, 0, "down_proj").in_features
    hadamard_factors(width)  # refuses a width no Hadamard order covers
    for index in range(len(models.decoder_layers(model))):
        down = _linear(model, index, "down_proj")
        _set(down.weight, apply_hadamard(down.weight.double()))  # W H^T: the rows transformed
        down.register_forward_pre_hook(_hadamard_hook)
        setattr(down, _ONLINE, True)
    return width


@torch.no_grad()
def remove_online_hadamard(model) -> None:
    """Undo the online rotation's split for a plain model: W <- W H (the weight as it acts on the
    unrotated input, float grid points or not) and the hook removed. The function is unchanged."""
    for index in range(len(models.decoder_layers(model))):
        down = _linear(model, index, "down_proj")
        if getattr(down, _ONLINE, None) is None:
            continue
        delattr(down, _ONLINE)
        for key, hook in list(down._forward_pre_hooks.items()):
            if hook is _hadamard_hook:
                del down._forward_pre_hooks[key]
        _set(down.weight, _times_hadamard(down.weight.double()))


def _times_hadamard(w: torch.Tensor) -> torch.Tensor:
    """``w @ Hn`` for the normalised Hadamard Hn of :func:`apply_hadamard` (which computes ``x @ Hn.T``)."""
    eye = torch.eye(w.shape[1], dtype=w.dtype)
    return w @ apply_hadamard(eye).t()
