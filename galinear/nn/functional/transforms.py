"""Fixed orthogonal transforms used by the baselines."""
from __future__ import annotations

import math

import torch


def fwht(x: torch.Tensor, length: int | None = None) -> torch.Tensor:
    """Orthonormal fast Walsh-Hadamard transform over the last axis.

    The last axis is cut into consecutive segments of ``length`` (a power of two dividing it;
    default the whole axis, which must then be a power of two) and each is transformed by
    H / sqrt(length), H the Sylvester-Hadamard matrix: x -> (I kron H) x / sqrt(length).
    """
    size = x.shape[-1]
    length = size if length is None else int(length)
    if length < 1 or length & (length - 1) or size % length:
        raise ValueError(f"fwht needs a power-of-two segment length dividing {size}, got {length}")
    shape = x.shape
    y = x.reshape(-1, size // length, length)
    h = 1
    while h < length:
        y = y.reshape(y.shape[0], y.shape[1], length // (2 * h), 2, h)
        a, b = y[..., 0, :], y[..., 1, :]
        y = torch.stack((a + b, a - b), dim=-2)
        h *= 2
    return (y.reshape(shape) / math.sqrt(length))
