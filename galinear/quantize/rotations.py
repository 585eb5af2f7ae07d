r"""Rotation families: orthogonal d x d matrices Q, applied to the residual stream as x -> x Q.

Every family returns its matrix from :meth:`Rotation.matrix` (differentiable in the learned ones)
and counts its learned parameters in :meth:`Rotation.num_parameters`:

- ``none``: the identity;
- ``hadamard``: QuaRot's random Hadamard :math:`D H / \sqrt d` (D random signs from the seed;
  :mod:`galinear.quantize.hadamard` builds H for the widths that are not powers of two);
- ``cayley``: SpinQuant's learned rotation, :math:`Q = Q_0 (I - A)^{-1}(I + A)` with A skew,
  d (d - 1) / 2 parameters;
- ``butterfly``: ButterflyQuant's learned Givens butterflies, one
  :class:`galinear.nn.butterfly.Butterfly` per power-of-two chunk of the width, :math:`Q = Q_0\,
  \operatorname{diag}(B_1, \dots, B_m)`, m (c/2) log2 c parameters;
- ``rotor``: rotor sandwiches :math:`x \mapsto R x \tilde S` of Euclidean Cl(log2 c) on the
  power-of-two chunks (one :class:`galinear.nn.RotorLinear` of c -> c without scale per chunk),
  :math:`Q = Q_0\, \operatorname{diag}(M_1, \dots, M_m)`, 2 m C(log2 c, 2) parameters (270 for
  576 = 9 x 64), orthogonal by construction, trained through galinear's exact gradient of exp.
  With ``layers`` > 1 (``--rotor-layers``), that many layers of chunk rotors, every other one acting
  on the coordinates dealt out across the chunks (the (chunks, chunk) grid read column by column:
  P B P^-1), so that the learned factor mixes every chunk with every other and is still the
  identity at zero: ``layers`` times the parameters.

:math:`Q_0` is the random Hadamard of the same seed (a seeded random orthogonal matrix at widths no
Hadamard order covers): every learned family starts exactly where ``hadamard`` is, and the fixed
Hadamard mixes across the chunks so that the whole map is a rotation of the model's width. All
learned parameters start at zero (the learned factor is the identity).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from galinear.quantize.hadamard import _factors, hadamard_factors, random_hadamard

__all__ = ["FAMILIES", "LEARNED", "Rotation", "make_rotation", "chunk_size", "base_rotation", "times_stages"]

FAMILIES = ("none", "hadamard", "cayley", "butterfly", "rotor")
LEARNED = ("cayley", "butterfly", "rotor")


def chunk_size(width: int, cap: int = 64) -> int:
    """The largest power of two dividing ``width``, at most ``cap`` (the learned chunks' size)."""
    return min(width & -width, cap)


def base_rotation(width: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    """:math:`Q_0`: the random Hadamard of ``seed``, or a seeded random orthogonal matrix (QR of a
    Gaussian, signs fixed) where no Hadamard order covers ``width``."""
    if _factors(width) is not None:
        return random_hadamard(width, seed, dtype)
    generator = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(width, width, generator=generator, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).to(dtype)


class Rotation(nn.Module):
    """An orthogonal ``width`` x ``width`` matrix of one family (module doc)."""

    def __init__(self, family: str, width: int, seed: int = 0, chunk: int | None = None, dtype=torch.float32,
                 layers: int = 1):
        super().__init__()
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"--rotor-layers must be an integer >= 1, got {layers!r}")
        if layers > 1 and family != "rotor":
            raise ValueError(f"--rotor-layers {layers}: only the rotor family has layers; leave it at 1 for {family}")
        if family not in FAMILIES:
            raise ValueError(f"--rotation: unknown rotation family {family!r}; choose one of {', '.join(FAMILIES)}")
        if family == "hadamard":
            hadamard_factors(width)  # refuses a width no Hadamard order covers, naming the fix
        self.family, self.width, self.seed, self.layers = family, width, seed, layers
        self.chunk = chunk_size(width) if chunk is None else int(chunk)
        if family in ("butterfly", "rotor") and (self.chunk < 4 or width % self.chunk or self.chunk & (self.chunk - 1)):
            raise ValueError(f"--chunk: the {family} rotation needs a power-of-two chunk >= 4 dividing the width "
                             f"{width}, got {self.chunk}; give --chunk {chunk_size(width)} (or use cayley)")
        base = torch.eye(width, dtype=dtype) if family == "none" else base_rotation(width, seed).to(dtype)
        self.register_buffer("base", base)
        self.chunks = width // self.chunk
        if family == "cayley":
            self.skew = nn.Parameter(torch.zeros(width * (width - 1) // 2, dtype=dtype))
            rows, cols = torch.triu_indices(width, width, offset=1)
            self.register_buffer("rows", rows, persistent=False)
            self.register_buffer("cols", cols, persistent=False)
        elif family == "butterfly":
            from galinear.nn.butterfly import Butterfly

            self.blocks = nn.ModuleList(Butterfly(self.chunk, dtype=dtype) for _ in range(self.chunks))
        elif family == "rotor":
            from galinear.nn import RotorLinear

            self.blocks = nn.ModuleList(RotorLinear(self.chunk, self.chunk, alpha=False, chunk_size=self.chunk,
                                                    backend="dense", dtype=dtype)
                                        for _ in range(self.chunks * layers))
            # between two layers of chunk rotors, the coordinates are dealt out across the chunks: the
            # (chunks, chunk) grid read column by column, so each new chunk draws on every old one
            shuffle = torch.arange(width).reshape(self.chunks, self.chunk).t().reshape(-1)
            self.register_buffer("shuffle", shuffle, persistent=False)
            self.register_buffer("unshuffle", torch.argsort(shuffle), persistent=False)
            with torch.no_grad():
                for block in self.blocks:
                    block.left_bivectors.zero_()
                    block.right_bivectors.zero_()

    def learned(self) -> torch.Tensor:
        """The learned factor alone (the identity for ``none`` and ``hadamard``)."""
        eye = torch.eye(self.width, dtype=self.base.dtype, device=self.base.device)
        if self.family == "cayley":
            A = torch.zeros_like(eye).index_put((self.rows, self.cols), self.skew)
            A = A - A.t()
            return torch.linalg.solve(eye - A, eye + A)
        if self.family in ("butterfly", "rotor"):
            return times_stages(eye, self.learned_stages())
        return eye

    def learned_stages(self) -> list | None:
        """The learned factor as a product of stages, for the structured families (None for the others):
        ``("blocks", B)`` a block-diagonal matrix of the (chunks, chunk, chunk) blocks B, ``("shuffle", p)``
        the permutation matrix P with (x P)[k] = x[p[k]]; for the rotor family
        L = B_1 (P B_2 P^-1) B_3 (P B_4 P^-1) ..., the identity when every rotor is
        (:func:`times_stages` applies it)."""
        if self.family == "butterfly":
            return [("blocks", torch.stack([block.matrix() for block in self.blocks]))]
        if self.family == "rotor":
            stages = []
            for layer in range(self.layers):
                chunk_maps = self.blocks[layer * self.chunks:(layer + 1) * self.chunks]
                blocks = ("blocks", torch.stack([block.dense_weight() for block in chunk_maps]))
                # every other layer acts on the coordinates dealt out across the chunks: P B P^-1
                stages += [("shuffle", self.shuffle), blocks, ("shuffle", self.unshuffle)] if layer % 2 else [blocks]
            return stages
        return None

    def matrix(self) -> torch.Tensor:
        """Q = Q_0 times the learned factor: x -> x Q on the residual stream."""
        if self.family in ("none", "hadamard"):
            return self.base
        return self.base @ self.learned()

    def forward(self) -> torch.Tensor:
        """:meth:`matrix` (so that ``torch.func.functional_call`` can evaluate it at given parameters)."""
        return self.matrix()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def describe(self) -> str:
        if self.family in ("none", "hadamard"):
            return self.family
        return f"{self.family} ({self.num_parameters():,} parameters" + (
            f", {self.chunks} chunks of {self.chunk}" if self.family != "cayley" else "") + (
            f", {self.layers} layers" if self.layers > 1 else "") + ")"


def times_stages(x: torch.Tensor, stages: list) -> torch.Tensor:
    """``x @ L`` for the learned factor L given by :meth:`Rotation.learned_stages`, on the last axis of
    ``x``: one batched chunk product per block stage, one gather per shuffle."""
    for kind, value in stages:
        if kind == "shuffle":
            x = x[..., value]
        else:
            m, c, _ = value.shape
            lead = x.shape[:-1]
            x = torch.einsum("...mc,mcd->...md", x.reshape(*lead, m, c), value).reshape(*lead, m * c)
    return x


def make_rotation(family: str, width: int, seed: int = 0, chunk: int | None = None, dtype=torch.float32,
                  layers: int = 1) -> Rotation:
    return Rotation(family, width, seed, chunk, dtype, layers)


def dense_parameters(width: int) -> int:
    """The parameters of the Cayley family at ``width``: d (d - 1) / 2."""
    return width * (width - 1) // 2


def rotation_flops(family: str, width: int, chunk: int) -> int:
    """Multiply-adds a row of applying the rotation online (0 where it is fused): for reports."""
    if family == "none":
        return 0
    m, power = hadamard_factors(width) if _factors(width) else (width, 1)
    fast = width * int(math.log2(power)) + width * m
    return {"hadamard": fast, "cayley": width * width}.get(family, fast + width * chunk)
