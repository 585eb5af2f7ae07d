"""The paper's parameter-matched baselines: low-rank and block(-Hadamard) linear layers."""
from __future__ import annotations

import math

import torch
from torch import nn

from galinear._util import count_parameters
from galinear.nn.checks import _check_allocation, _check_float_dtype, _check_input, _check_positive
from galinear.nn.functional import fwht

__all__ = ["LowRankLinear", "BlockHadamardLinear", "low_rank_parameters"]


def low_rank_parameters(in_features: int, out_features: int, rank: int, bias: bool = False) -> int:
    """Parameters of a :class:`LowRankLinear`: rank (in + out), plus out_features for the bias."""
    return rank * (in_features + out_features) + (out_features if bias else 0)


class LowRankLinear(nn.Module):
    r"""y = U (D x) + bias with D (rank, in) and U (out, rank): rank * (in + out) parameters.

    The paper's LR1 / LR4 baselines (rank 1 / 4).
    """

    def __init__(self, in_features, out_features, rank, bias=False, device=None, dtype=None):
        super().__init__()
        for name, value in (("in_features", in_features), ("out_features", out_features), ("rank", rank)):
            _check_positive(name, value)
        owner = f"LowRankLinear({in_features}, {out_features}, rank={rank})"
        _check_float_dtype(owner, dtype)
        _check_allocation(owner, low_rank_parameters(in_features, out_features, rank, bias), dtype, device,
                          fix="use a smaller rank or smaller widths")
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.down = nn.Parameter(torch.empty(rank, in_features, **factory))
        self.up = nn.Parameter(torch.empty(out_features, rank, **factory))
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Uniform(+-1/sqrt(fan_in)) for both factors, like nn.Linear; bias 0."""
        nn.init.uniform_(self.down, -1 / math.sqrt(self.in_features), 1 / math.sqrt(self.in_features))
        nn.init.uniform_(self.up, -1 / math.sqrt(self.rank), 1 / math.sqrt(self.rank))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x):
        _check_input(self, x)
        y = (x @ self.down.t()) @ self.up.t()
        return y + self.bias if self.bias is not None else y

    def dense_weight(self) -> torch.Tensor:
        """The equivalent (out, in) matrix U D."""
        return self.up @ self.down

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, bias={self.bias is not None}"


class BlockHadamardLinear(nn.Module):
    r"""Block-diagonal linear stages with fast Walsh-Hadamard transforms between them.

    The input is zero-padded to ``in_pad = ceil(in/blocks) * blocks`` features; the output
    width is ``out_pad = ceil(out/blocks) * blocks`` and the first ``out_features`` are returned.
    Stage 1 is block-diagonal (``blocks`` blocks of size (out_pad/blocks) x (in_pad/blocks));
    every further stage (depth >= 2) is preceded by an orthonormal Walsh-Hadamard transform
    :math:`I \otimes H_L / \sqrt{L}` (L the largest power of two dividing out_pad, so that a
    width that is not a power of two is handled) and is block-diagonal of size out_pad/blocks.

    ``depth=1`` is the paper's BH1 (as run by the authors, no Hadamard stage): 128 blocks on
    LLaMA-3.2-1B's q (2048 -> 2048) and k, v (2048 -> 512) give 49,152 parameters per layer.
    Parameters: blocks * (in_pad/blocks) * (out_pad/blocks) + (depth-1) * blocks * (out_pad/blocks)**2
    (+ out_features for the bias).
    """

    def __init__(self, in_features, out_features, blocks, depth=1, bias=False, device=None, dtype=None):
        super().__init__()
        for name, value in (
            ("in_features", in_features), ("out_features", out_features), ("blocks", blocks), ("depth", depth)
        ):
            _check_positive(name, value)
        if blocks > min(in_features, out_features):
            raise ValueError(
                f"blocks={blocks} exceeds min(in_features, out_features)={min(in_features, out_features)}: "
                "some blocks would see only padding; use at most that many blocks"
            )
        owner = f"BlockHadamardLinear({in_features}, {out_features}, blocks={blocks}, depth={depth})"
        _check_float_dtype(owner, dtype)
        block_in, block_out = -(-in_features // blocks), -(-out_features // blocks)
        values = blocks * block_out * (block_in + (depth - 1) * block_out) + out_features * bool(bias)
        _check_allocation(owner, values, dtype, device, fix="use more blocks, a smaller depth or smaller widths")
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features, self.blocks, self.depth = in_features, out_features, blocks, depth
        self.block_in = -(-in_features // blocks)
        self.block_out = -(-out_features // blocks)
        self.padded_in = self.block_in * blocks
        self.padded_out = self.block_out * blocks
        self.hadamard_length = self.padded_out & -self.padded_out  # largest power of two dividing it
        self.first = nn.Parameter(torch.empty(blocks, self.block_out, self.block_in, **factory))
        self.stages = nn.Parameter(torch.empty(depth - 1, blocks, self.block_out, self.block_out, **factory))
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Uniform(+-1/sqrt(fan_in)) per block (fan_in = the block's input size); bias 0."""
        nn.init.uniform_(self.first, -1 / math.sqrt(self.block_in), 1 / math.sqrt(self.block_in))
        nn.init.uniform_(self.stages, -1 / math.sqrt(self.block_out), 1 / math.sqrt(self.block_out))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x):
        _check_input(self, x)
        if self.padded_in != self.in_features:
            x = nn.functional.pad(x, (0, self.padded_in - self.in_features))
        h = torch.einsum("...gi,goi->...go", x.unflatten(-1, (self.blocks, self.block_in)), self.first)
        for stage in self.stages:
            h = fwht(h.flatten(-2), self.hadamard_length).unflatten(-1, (self.blocks, self.block_out))
            h = torch.einsum("...gi,goi->...go", h, stage)
        y = h.flatten(-2)[..., : self.out_features]
        return y + self.bias if self.bias is not None else y

    def dense_weight(self) -> torch.Tensor:
        """The equivalent (out, in) matrix (bias excluded)."""
        eye = torch.eye(self.in_features, dtype=self.first.dtype, device=self.first.device)
        y = self.forward(eye)
        return (y - self.bias if self.bias is not None else y).t()

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, blocks={self.blocks}, "
            f"depth={self.depth}, bias={self.bias is not None}"
        )
