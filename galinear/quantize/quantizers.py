r"""Simulated (fake) quantization in torch: every value is rounded to its grid and mapped back to floats.

Nothing here packs integers or runs integer kernels: a quantized tensor is the float tensor of its
grid points, :math:`\hat w = s\,(q - z)`, so a model keeps its modules and dtype and the error is
exactly the quantization error.

- Weights (:func:`quantize_weight`): one grid per output channel (a row of the (out, in) matrix),
  or, with ``group_size`` G, one grid per run of G consecutive input columns of each row (the last
  run of a row may be shorter; ``--group-size``); symmetric (:math:`z = 2^{b-1}`,
  :math:`s = 2\max|w| / (2^b - 1)`) or asymmetric (:math:`s = (\max w - \min w) / (2^b - 1)`,
  :math:`z = \text{round}(-\min w / s)`), codes
  :math:`q = \text{clamp}(\text{round}(w / s) + z, 0, 2^b - 1)`, max and min taken over the row or
  the group; 2..8 bits. Every value inside its grid's range is within half a step of its grid point.
- Activations (:func:`quantize_activation`): one symmetric grid per token (a row), its range a
  clipping ratio times the token's largest magnitude; :func:`search_clip_ratio` picks the ratio
  on calibration rows. 2..16 bits, 16 meaning not quantized.
- KV cache (:func:`quantize_heads`): one asymmetric grid per token and per head.

Rounding passes gradients straight through (:func:`ste_round`), so a learned rotation can be
trained on the quantized network's loss.
"""
from __future__ import annotations

import torch

__all__ = ["WEIGHT_BITS", "ACTIVATION_BITS", "check_bits", "check_group_size", "ste_round", "weight_grid",
           "fake_quantize", "quantize_weight", "quantize_activation", "quantize_heads", "search_clip_ratio", "CLIP_RATIOS"]

#: Bit widths of weights and of activations / KV cache (16: not quantized).
WEIGHT_BITS = (2, 8)
ACTIVATION_BITS = (2, 16)
#: Clipping ratios tried by :func:`search_clip_ratio`.
CLIP_RATIOS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6)


def check_bits(bits, what: str = "weight", limits=WEIGHT_BITS, option: str = "--wbits") -> int:
    """``bits`` when it is an integer within ``limits``, else ValueError naming the option and the range."""
    low, high = limits
    if isinstance(bits, bool) or not isinstance(bits, int) or not low <= bits <= high:
        extra = " (16 keeps them in floating point)" if high == 16 else ""
        raise ValueError(f"{option}: {what} bit width must be an integer in {low}..{high}{extra}, got {bits!r}; "
                         f"give {option} {max(low, min(high, 4))} for example")
    return bits


def check_group_size(group_size) -> int | None:
    """``group_size`` when it is None (one grid per output channel) or an integer >= 2, else ValueError
    naming the option."""
    if group_size is None:
        return None
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"--group-size: a weight group is an integer number >= 2 of input columns, got "
                         f"{group_size!r}; give --group-size 64 or 128 for example, or leave it out for one grid "
                         "per output channel")
    return group_size


def ste_round(x: torch.Tensor) -> torch.Tensor:
    """round(x) in the forward pass, the identity's gradient in the backward pass (straight-through)."""
    return x + (torch.round(x) - x).detach()


def weight_grid(w: torch.Tensor, bits: int, symmetric: bool = True, group_size: int | None = None):
    """(scale, zero) of one grid per row of ``w`` (each (rows, 1)), as the module doc defines them; with
    ``group_size`` G one grid per run of G consecutive columns of a row, given for every column (each
    (rows, columns), equal within a run)."""
    if group_size is not None:
        check_group_size(group_size)
        rows, columns = w.shape
        runs = -(-columns // group_size)
        padded = torch.nn.functional.pad(w, (0, runs * group_size - columns))  # zeros move no max or min below
        scale, zero = weight_grid(padded.reshape(rows * runs, group_size), bits, symmetric)
        spread = [t.reshape(rows, runs).repeat_interleave(group_size, dim=1)[:, :columns] for t in (scale, zero)]
        return spread[0], spread[1]
    top = 2 ** bits - 1
    if symmetric:
        scale = 2 * w.abs().amax(dim=-1, keepdim=True) / top
        zero = torch.full_like(scale, float(2 ** (bits - 1)))
    else:
        low = w.amin(dim=-1, keepdim=True).clamp(max=0)
        high = w.amax(dim=-1, keepdim=True).clamp(min=0)
        scale = (high - low) / top
        zero = torch.round(-low / torch.where(scale > 0, scale, torch.ones_like(scale)))
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row: any scale is exact
    return scale, zero


def fake_quantize(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int,
                  straight_through: bool = False) -> torch.Tensor:
    """:math:`s\\,(\\text{clamp}(\\text{round}(w/s) + z, 0, 2^b - 1) - z)`; with ``straight_through``
    the rounding passes gradients unchanged."""
    rounded = ste_round(w / scale) if straight_through else torch.round(w / scale)
    return scale * (torch.clamp(rounded + zero, 0, 2 ** bits - 1) - zero)


def quantize_weight(w: torch.Tensor, bits: int, symmetric: bool = True, straight_through: bool = False,
                    group_size: int | None = None):
    """Round-to-nearest of the (out, in) matrix ``w``, one grid per output channel, or per run of
    ``group_size`` columns of each channel."""
    check_bits(bits)
    scale, zero = weight_grid(w.detach() if not straight_through else w, bits, symmetric, group_size)
    return fake_quantize(w, scale, zero, bits, straight_through)


def quantize_activation(x: torch.Tensor, bits: int, clip: float = 1.0, straight_through: bool = False):
    """Symmetric per-token quantization of ``x`` (..., width): each row's grid spans
    ``clip * max|row|``; 16 bits returns ``x`` unchanged."""
    check_bits(bits, "activation", ACTIVATION_BITS, "--abits")
    if bits >= 16:
        return x
    half = 2 ** (bits - 1)
    scale = clip * x.abs().amax(dim=-1, keepdim=True) / (half - 1 if bits > 1 else 1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    rounded = ste_round(x / scale) if straight_through else torch.round(x / scale)
    return scale * torch.clamp(rounded, -half, half - 1)


def quantize_heads(x: torch.Tensor, bits: int, head_dim: int, straight_through: bool = False) -> torch.Tensor:
    """Asymmetric quantization of ``x`` (..., heads * head_dim) with one grid per token and head; with
    ``straight_through`` the rounding passes gradients unchanged."""
    check_bits(bits, "KV cache", ACTIVATION_BITS, "--kvbits")
    if bits >= 16:
        return x
    shape = x.shape
    heads = x.reshape(*shape[:-1], shape[-1] // head_dim, head_dim)
    scale, zero = weight_grid(heads if straight_through else heads.detach(), bits, symmetric=False)
    return fake_quantize(heads, scale, zero, bits, straight_through).reshape(shape)


def search_clip_ratio(x: torch.Tensor, bits: int, weight: torch.Tensor | None = None, ratios=CLIP_RATIOS) -> float:
    """The ratio of ``ratios`` whose per-token quantization of the calibration rows ``x`` (n, width)
    has the least squared error, of the rows themselves, or with ``weight`` (out, width) of the
    layer's output ``x W^T``; the first (1.0) for 16 bits."""
    if bits >= 16:
        return 1.0
    x = x.detach().double()
    w = None if weight is None else weight.detach().double()
    best, best_error = ratios[0], float("inf")
    for ratio in ratios:
        delta = quantize_activation(x, bits, ratio) - x
        error = float(((delta @ w.t()) if w is not None else delta).pow(2).sum())
        if error < best_error:
            best, best_error = ratio, error
    return float(best)
