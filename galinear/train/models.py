"""Multilayer perceptrons whose linear layers are dense, rotor or low-rank.

Every model has the same skeleton, so that only the linear maps differ::

    x (784 pixels, standardised)
    h_1 = act(norm(L_1 x))                 L_1: in_features -> hidden
    h_l = act(norm(L_l h_{l-1}))           L_l: hidden -> hidden,  l = 2..depth
    logits = head(h_depth)                 head: hidden -> classes (dense unless head="rotor")

``norm`` is a LayerNorm without affine parameters (no parameters) or the identity.
``L`` is ``torch.nn.Linear`` (kind "dense"), ``galinear.nn.RotorLinear`` (kind "rotor": the
paper's generalised rotor gadget, Pence et al. 2025, Eq. 6, with double rotors x -> R x S~)
or ``galinear.nn.LowRankLinear`` (kind "lowrank": y = A(Bx)).

The parameter count of a model is ``sum(p.numel() for p in model.parameters())``: every
parameter is counted, the head and biases included.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear._util import count_parameters
from galinear.train.config import MODEL_KINDS, MLPConfig

__all__ = ["MLPConfig", "build_mlp", "count_parameters", "MODEL_KINDS", "training_bytes", "check_training_memory"]


def _linear(config: MLPConfig, d_in: int, d_out: int, kind: str) -> nn.Module:
    if kind == "dense":
        return nn.Linear(d_in, d_out, bias=config.bias)
    if kind == "rotor":
        from galinear.nn.rotor import RotorLinear, fitting_chunk_size

        layer = RotorLinear(
            d_in, d_out, bias=config.bias, double_rotor=True,
            chunk_size=fitting_chunk_size(d_in, d_out, config.chunk_size),
            alpha=True, backend=config.backend, gradient=config.rotor_gradient,
        )
        if config.rotor_init_std is not None:
            with torch.no_grad():
                for bivectors in (layer.left_bivectors, layer.right_bivectors):
                    if bivectors is not None:
                        bivectors.normal_(0.0, config.rotor_init_std)
        return layer
    from galinear.nn import LowRankLinear

    return LowRankLinear(d_in, d_out, config.rank, bias=config.bias)


class SharedPReLU(nn.Module):
    """act(x) = max(x, 0) + a min(x, 0) with ONE slope a shared by every layer that holds it."""

    def __init__(self, slope: nn.Parameter):
        super().__init__()
        self.slope = slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x >= 0, x, self.slope * x)


class MLP(nn.Module):
    """The MLP of :class:`MLPConfig`; forward takes (batch, in_features) or images (batch, 28, 28)."""

    def __init__(self, config: MLPConfig):
        super().__init__()
        config.validate()
        self.config = config
        widths = [config.in_features] + [config.hidden] * config.depth
        if config.activation == "prelu":
            self.prelu_slope = nn.Parameter(torch.tensor(0.25))
        layers = []
        for d_in, d_out in zip(widths[:-1], widths[1:]):
            layers.append(_linear(config, d_in, d_out, config.kind))
            if config.layer_norm:
                layers.append(nn.LayerNorm(d_out, elementwise_affine=False))
            layers.append(self._activation())
            if config.dropout > 0:
                layers.append(nn.Dropout(config.dropout))
        self.body = nn.Sequential(*layers)
        if config.head == "rotor":
            from galinear.nn import RotorLinear

            self.head = RotorLinear(config.hidden, config.num_classes, bias=True, backend=config.backend,
                                    gradient=config.rotor_gradient)
        else:
            self.head = nn.Linear(config.hidden, config.num_classes)

    def _activation(self) -> nn.Module:
        name = self.config.activation
        if name == "relu":
            return nn.ReLU()
        if name == "gelu":
            return nn.GELU()
        if name == "tanh":
            return nn.Tanh()
        return SharedPReLU(self.prelu_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)
        if x.shape[-1] != self.config.in_features:
            raise ValueError(
                f"input has {x.shape[-1]} features per example, the model expects "
                f"{self.config.in_features}; reshape or rebuild the model with in_features={x.shape[-1]}"
            )
        return self.head(self.body(x))


def build_mlp(config: MLPConfig | None = None, **overrides) -> MLP:
    """Build the MLP of ``config`` (or of ``MLPConfig(**overrides)``)."""
    if config is None:
        config = MLPConfig(**overrides)
    elif overrides:
        config = MLPConfig(**{**config.to_dict(), **overrides})
    return MLP(config)


def training_bytes(config: MLPConfig, batch_size: int, eval_batch_size: int = 2000) -> int:
    """A lower bound on the memory (bytes, float32) that training ``config`` needs.

    Dense and low-rank maps: weight, gradient and Adam's two moments; rotor maps with the dense
    backend: the assembled matrix and its gradient (their own parameters are few); activations:
    three (batch, hidden) arrays per hidden layer kept for the backward pass, or one per layer for
    an evaluation batch, whichever is larger.
    """
    widths = [config.in_features] + [config.hidden] * config.depth
    maps = [(a, b, config.kind) for a, b in zip(widths[:-1], widths[1:])]
    maps.append((config.hidden, config.num_classes, "rotor" if config.head == "rotor" else "dense"))
    values = 0
    for d_in, d_out, kind in maps:
        if kind == "dense":
            values += 4 * (d_in * d_out + d_out)
        elif kind == "lowrank":
            values += 4 * (config.rank * (d_in + d_out) + d_out)
        elif config.backend == "dense":
            values += 2 * d_in * d_out
    values += max(3 * batch_size, eval_batch_size) * config.hidden * config.depth
    return 4 * values


def check_training_memory(config: MLPConfig, batch_size: int, eval_batch_size: int = 2000) -> None:
    """Raise :class:`galinear._limits.TooLargeError` (a ValueError and a MemoryError) before
    allocating anything when training ``config`` cannot fit in the memory available now."""
    from galinear._limits import TooLargeError, available_memory, format_bytes

    need = training_bytes(config, batch_size, eval_batch_size)
    available = available_memory(torch.device("cpu"))
    if available is not None and need > available:
        raise TooLargeError(
            f"a {config.kind} MLP with hidden width {config.hidden:,} and depth {config.depth} needs at least "
            f"{format_bytes(need)} to train (batch {batch_size}, evaluation batch {eval_batch_size}), but only "
            f"{format_bytes(available)} of memory are available; use a smaller --hidden (or depth, batch size)"
        )
