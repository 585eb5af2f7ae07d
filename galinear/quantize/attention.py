r"""The KV cache quantized after RoPE, with QuaRot's and SpinQuant's R3: a per-head rotation of Q and K after RoPE.

A model's attention module computes Q and K, applies RoPE, appends K and V to the cache and calls the
attention function its config names through transformers' ``AttentionInterface``. This module
registers one more such function, :data:`ATTENTION` (``"galinear_quantized_sdpa"``), that takes the
query, key and value as the cache returns them, (batch, heads, seq, head_dim) after RoPE, and

1. when the attention module carries R3 (an orthogonal head_dim x head_dim matrix), multiplies the
   query and the key by it on the last axis: :math:`(q R)(k R)^T = q k^T`, so the scores are unchanged
   while K's outliers are spread across the head before the cache is quantized;
2. when it carries KV bits below 16, quantizes the key and the value with one asymmetric grid per
   token and per head (:func:`galinear.quantize.quantizers.quantize_heads` on each head_dim vector),
   with straight-through rounding when asked (training through the quantized cache);
3. calls transformers' ``"sdpa"`` attention with the rest unchanged (masks, sliding windows, GQA).

The cache itself keeps the unquantized K and V; the key and value are quantized as they leave it, each
token's vector on its own grid, so a token's cached entry is quantized the same way at every step:
the same function as a cache that stores the quantized vectors.

:func:`install_kv_quantizer` sets the attributes on every decoder layer's attention module and switches
the model's attention implementation to :data:`ATTENTION`; :func:`remove_kv_quantizer` undoes both.
The attributes are plain tensors and numbers (no parameters, no buffers, no hooks), so the model's
state dict and saved folders do not change and ``copy.deepcopy`` copies them with the model.
"""
from __future__ import annotations

import torch

from galinear.lm import models
from galinear.quantize.quantizers import ACTIVATION_BITS, check_bits, quantize_heads

__all__ = ["ATTENTION", "install_kv_quantizer", "remove_kv_quantizer", "kv_quantizer", "quantized_sdpa"]

#: The attention implementation registered by this module.
ATTENTION = "galinear_quantized_sdpa"

#: Attributes set on each attention module (and on the model: the implementation it had before).
_BITS, _R3, _STE, _PREVIOUS = "galinear_kv_bits", "galinear_r3", "galinear_kv_straight_through", \
    "galinear_attention_before"


def quantized_sdpa(module, query, key, value, attention_mask, *args, **kwargs):
    """The attention function of :data:`ATTENTION` (module doc): R3 on query and key, then the key and value
    quantized per token and head, then transformers' sdpa attention with everything else as given."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    r3 = getattr(module, _R3, None)
    if r3 is not None:
        r3 = r3.to(device=query.device, dtype=query.dtype)
        query, key = query @ r3, key @ r3
    bits = getattr(module, _BITS, 16)
    if bits < 16:
        ste = bool(getattr(module, _STE, False))
        key = quantize_heads(key, bits, key.shape[-1], straight_through=ste)
        value = quantize_heads(value, bits, value.shape[-1], straight_through=ste)
    return ALL_ATTENTION_FUNCTIONS["sdpa"](module, query, key, value, attention_mask, *args, **kwargs)


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(ATTENTION, quantized_sdpa)
    # the masks sdpa expects (causal, sliding window); an implementation with no mask function gets none
    AttentionMaskInterface.register(ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _attention_modules(model) -> list:
    """Every decoder layer's attention module, or ValueError naming the model type and what is supported."""
    kind = getattr(getattr(model, "config", None), "model_type", None) or type(model).__name__
    supported = ("models whose attention goes through transformers' AttentionInterface (Llama, Mistral, Qwen2, "
                 "Gemma-3 text, ...)")
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        raise ValueError(f"the KV cache quantizer needs a transformers model, got {type(model).__name__}; "
                         f"supported: {supported}")
    if not type(model)._can_set_attn_implementation():
        raise ValueError(f"{kind} ({type(model).__name__}): its attention does not go through transformers' "
                         f"AttentionInterface, so the KV cache cannot be quantized after RoPE; supported: {supported}")
    try:
        modules = [models.attention(block) for block in models.decoder_layers(model)]
    except ValueError as error:
        raise ValueError(f"{kind}: {error}; supported: {supported}") from None
    if any(not isinstance(getattr(m, "head_dim", None), int) for m in modules):
        raise ValueError(f"{kind}: its attention modules have no head_dim; supported: {supported}")
    return modules


def _check_r3(r3, head_dim: int, kind: str) -> torch.Tensor:
    r3 = torch.as_tensor(r3).detach()
    if r3.shape != (head_dim, head_dim):
        raise ValueError(f"R3 must be a head_dim x head_dim matrix ({head_dim} x {head_dim} for {kind}), "
                         f"got shape {tuple(r3.shape)}")
    if not r3.is_floating_point():
        raise ValueError(f"R3 must be a floating-point matrix, got {r3.dtype}")
    r = r3.double()
    error = float((r @ r.t() - torch.eye(head_dim, dtype=torch.float64, device=r.device)).abs().max())
    if not error < 1e-4:
        raise ValueError(f"R3 must be orthogonal (R R^T = I keeps q k^T unchanged); |R R^T - I| reaches {error:.3g}")
    return r3.clone()


def install_kv_quantizer(model, kvbits: int, r3=None, straight_through: bool = False):
    """Quantize ``model``'s KV cache after RoPE to ``kvbits`` (16: not quantized) and, when ``r3`` (an
    orthogonal head_dim x head_dim matrix) is given, rotate Q and K per head by it after RoPE (module doc).
    In place; returns ``model``. Installing again replaces the settings; :func:`remove_kv_quantizer`
    restores the attention implementation the model had before the first install."""
    check_bits(kvbits, "KV cache", ACTIVATION_BITS, "--kvbits")
    modules = _attention_modules(model)
    kind = model.config.model_type or type(model).__name__
    dims = {m.head_dim for m in modules}
    if r3 is not None:
        if len(dims) != 1:
            raise ValueError(f"{kind}: attention heads of several widths ({sorted(dims)}); one R3 cannot fit them all")
        # kept on the device of the weights (the attention function still moves it to the query's)
        r3 = _check_r3(r3, dims.pop(), kind).to(next(modules[0].parameters()).device)
    _register()
    previous = getattr(model, _PREVIOUS, None) or model.config._attn_implementation
    for module in modules:
        setattr(module, _BITS, int(kvbits))
        setattr(module, _R3, r3)
        setattr(module, _STE, bool(straight_through))
    _set_implementation(model, ATTENTION)
    setattr(model, _PREVIOUS, previous)
    return model


def remove_kv_quantizer(model):
    """Undo :func:`install_kv_quantizer`: the attributes removed and the attention implementation the model had
    before restored. A model without the quantizer is left as it is. Returns ``model``."""
    previous = getattr(model, _PREVIOUS, None)
    if previous is None:
        return model
    for module in _attention_modules(model):
        for name in (_BITS, _R3, _STE):
            if hasattr(module, name):
                delattr(module, name)
    _set_implementation(model, previous)
    delattr(model, _PREVIOUS)
    return model


def kv_quantizer(model) -> dict | None:
    """{"kvbits", "r3", "straight_through"} of the quantizer installed on ``model``, or None."""
    if getattr(model, _PREVIOUS, None) is None:
        return None
    module = _attention_modules(model)[0]
    return {"kvbits": getattr(module, _BITS), "r3": getattr(module, _R3), "straight_through": getattr(module, _STE)}


def _set_implementation(model, name: str) -> None:
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:
        model.config._attn_implementation = name
    if model.config._attn_implementation != name:
        raise ValueError(f"{model.config.model_type or type(model).__name__}: its attention implementation could not "
                         f"be set to {name!r} (it stays {model.config._attn_implementation!r})")
