r"""A learned orthogonal map in the FFT (radix-2 butterfly) pattern: log2(n) layers of n/2 Givens
rotations each.

Layer l (l = 0 .. log2 n - 1, stride :math:`s = 2^l`) pairs each coordinate a whose bit l is 0 with
b = a + s, the pairs of one radix-2 FFT stage, and rotates every pair by its own angle:

.. math::

    (x_a, x_b) \mapsto (\cos\theta\, x_a - \sin\theta\, x_b,\; \sin\theta\, x_a + \cos\theta\, x_b).

After the log2(n) layers every output coordinate depends on every input coordinate, with
(n/2) log2(n) parameters and n log2(n) rotations (4 n log2 n multiply-adds) a row. Each layer is
orthogonal, so the product is: :meth:`Butterfly.inverse` applies the transpose (the layers in the
reverse order, each by minus its angles). All angles zero is the identity, the initial value.

The angles of layer l are stored in ``angles[l]`` in the order of their pairs (a, a + s):
block k = a // (2 s) first, then j = a mod s, index k s + j.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear.nn.checks import _check_float_dtype, _is_power_of_two

__all__ = ["Butterfly"]


class Butterfly(nn.Module):
    r"""An orthogonal n x n map on the last dimension: log2(n) layers of n/2 Givens rotations in the
    FFT pattern (module doc). Parameter ``angles`` of shape (log2 n, n // 2), zeros at first
    (the identity). ``forward(x) == x @ matrix().T`` for any leading shape of x."""

    def __init__(self, n: int, *, dtype=None, device=None):
        super().__init__()
        if not _is_power_of_two(n) or n < 2:
            raise ValueError(f"Butterfly(n): n must be a power of two >= 2, got {n!r}; pad the last "
                             "dimension to the next power of two (or use a block of this size)")
        _check_float_dtype(f"Butterfly({n})", dtype)
        self.n = n
        self.depth = n.bit_length() - 1
        self.angles = nn.Parameter(torch.zeros(self.depth, n // 2, dtype=dtype, device=device))

    def extra_repr(self) -> str:
        return f"n={self.n}, layers={self.depth}"

    def _layer(self, x: torch.Tensor, level: int, sign: float) -> torch.Tensor:
        stride = 1 << level
        blocks = x.reshape(*x.shape[:-1], self.n // (2 * stride), 2, stride)
        a, b = blocks[..., 0, :], blocks[..., 1, :]
        theta = self.angles[level].reshape(self.n // (2 * stride), stride)
        cos, sin = torch.cos(theta), sign * torch.sin(theta)
        return torch.stack((cos * a - sin * b, sin * a + cos * b), dim=-2).reshape(x.shape)

    def _check(self, x: torch.Tensor) -> None:
        if x.shape[-1:] != (self.n,):
            raise ValueError(f"Butterfly({self.n}) maps a last dimension of {self.n}, got shape {tuple(x.shape)}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check(x)
        for level in range(self.depth):
            x = self._layer(x, level, 1.0)
        return x

    def inverse(self, x: torch.Tensor) -> torch.Tensor:
        """The transpose map, ``x @ matrix()``: the layers in reverse order, each by minus its angles."""
        self._check(x)
        for level in reversed(range(self.depth)):
            x = self._layer(x, level, -1.0)
        return x

    def matrix(self) -> torch.Tensor:
        """The full n x n orthogonal matrix M with ``forward(x) == x @ M.T`` (differentiable)."""
        eye = torch.eye(self.n, dtype=self.angles.dtype, device=self.angles.device)
        return self.forward(eye).T
