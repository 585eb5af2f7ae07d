r"""The field's structured matrices as replacements of a dense (out, in) projection.

- :class:`KroneckerSumLinear`: :math:`W = \sum_k A_k \otimes B_k` (Van Loan & Pitsianis 1993);
- :class:`MonarchLinear`: :math:`W = P_o L P_m R` with block-diagonal L, R (Dao et al., ICML 2022);
- :class:`MixedBlockHadamardLinear`: a block-diagonal map whose blocks are mixed by a Hadamard
  transform (the block-Hadamard layer as the paper describes it).

Each module applies its factors without forming W (``forward``) and exposes the equivalent
matrix (``dense_weight``); :func:`nearest_kronecker_sum` and :func:`monarch_projection` are the
exact Frobenius-nearest members of the first two classes to a given W.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from galinear._util import count_parameters
from galinear.nn.checks import _check_allocation, _check_float_dtype, _check_input, _check_positive
from galinear.nn.functional import fwht

__all__ = ["KroneckerSumLinear", "MonarchLinear", "MixedBlockHadamardLinear", "nearest_kronecker_sum",
           "monarch_projection", "monarch_parameters", "default_kronecker_factors", "kronecker_sum_parameters",
           "kronecker_rearrange"]


def _closest_divisor(size: int) -> int:
    """The largest divisor of ``size`` that is <= sqrt(size)."""
    return max(d for d in range(1, math.isqrt(size) + 1) if size % d == 0)


def default_kronecker_factors(in_features: int, out_features: int):
    """((m1, n1), (m2, n2)) with m1 the largest divisor of out <= sqrt(out), n1 likewise for in.

    576 -> 576 gives ((24, 24), (24, 24)); 576 -> 192 gives ((12, 24), (16, 24)).
    """
    m1, n1 = _closest_divisor(out_features), _closest_divisor(in_features)
    return (m1, n1), (out_features // m1, in_features // n1)


def kronecker_sum_parameters(in_features: int, out_features: int, terms: int, bias: bool = False) -> int:
    """Parameters of a :class:`KroneckerSumLinear` of ``terms`` products with the default factor
    shapes: terms (m1 n1 + m2 n2), plus out_features for the bias."""
    (m1, n1), (m2, n2) = default_kronecker_factors(in_features, out_features)
    return terms * (m1 * n1 + m2 * n2) + (out_features if bias else 0)


def monarch_parameters(in_features: int, out_features: int, blocks: int, bias: bool = False) -> int:
    """Parameters of a :class:`MonarchLinear` with ``blocks`` (dividing both widths): b q p for R
    and q b^2 for L (p = in / b, q = out / b), plus out_features for the bias."""
    p, q = _monarch_shape(in_features, out_features, blocks)
    return blocks * q * (p + blocks) + (out_features if bias else 0)


def _bias_and_factory(module, out_features, bias, device, dtype):
    factory = {"device": device, "dtype": dtype}
    module.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
    return factory


def _finish(module, y):
    return y + module.bias if module.bias is not None else y


def kronecker_rearrange(weight: torch.Tensor, factors) -> torch.Tensor:
    r"""Van Loan-Pitsianis rearrangement R(W), shape (m1 n1, m2 n2).

    With rows of W indexed (i1, i2) -> i1 m2 + i2 and columns (j1, j2) -> j1 n2 + j2,
    :math:`R[(i_1, j_1), (i_2, j_2)] = W[(i_1, i_2), (j_1, j_2)]`, so that
    :math:`R(A \otimes B) = \mathrm{vec}(A)\,\mathrm{vec}(B)^\top` (row-major vec) and R is a
    permutation of the entries: :math:`\|W\|_F = \|R(W)\|_F`.
    """
    (m1, n1), (m2, n2) = factors
    return weight.reshape(m1, m2, n1, n2).permute(0, 2, 1, 3).reshape(m1 * n1, m2 * n2)


def nearest_kronecker_sum(weight: torch.Tensor, terms: int, factors):
    r"""The Frobenius-nearest :math:`\sum_{k<terms} A_k \otimes B_k` to ``weight``: (A, B, singular values).

    By :func:`kronecker_rearrange`, :math:`\|W - \sum_k A_k \otimes B_k\|_F
    = \|R(W) - \sum_k \mathrm{vec}(A_k)\mathrm{vec}(B_k)^\top\|_F`, a rank-``terms``
    approximation of R(W): by Eckart-Young its optimum is the truncated SVD
    :math:`R(W) \approx \sum_k \sigma_k u_k v_k^\top`; A_k = sqrt(sigma_k) u_k, B_k = sqrt(sigma_k) v_k
    (Van Loan & Pitsianis, "Approximation with Kronecker products", 1993). The optimum is unique
    when sigma_terms > sigma_{terms+1}. Returns A (terms, m1, n1), B (terms, m2, n2) and all
    singular values of R(W).
    """
    (m1, n1), (m2, n2) = factors
    r = kronecker_rearrange(weight, factors)
    u, s, vh = torch.linalg.svd(r, full_matrices=False)
    keep = min(terms, s.numel())
    root = s[:keep].sqrt()
    a = torch.zeros(terms, m1, n1, dtype=weight.dtype, device=weight.device)
    b = torch.zeros(terms, m2, n2, dtype=weight.dtype, device=weight.device)
    a[:keep] = (u[:, :keep] * root).t().reshape(keep, m1, n1)
    b[:keep] = (vh[:keep] * root[:, None]).reshape(keep, m2, n2)
    return a, b, s


class KroneckerSumLinear(nn.Module):
    r"""y = (sum_k A_k kron B_k) x + bias, applied without forming the (out, in) matrix.

    A_k is (m1, n1), B_k (m2, n2), m1 m2 = out_features and n1 n2 = in_features (``factors``
    ((m1, n1), (m2, n2)); default :func:`default_kronecker_factors`). With x viewed as X (n1, n2),
    y viewed as (m1, m2) is :math:`\sum_k A_k X B_k^\top`: two small products per term.
    Parameters: terms (m1 n1 + m2 n2) (+ out for the bias); multiply-adds per token:
    terms n1 m2 (n2 + m1). 24x24 kron 24x24 (576 -> 576): 1,152 parameters and 27,648
    multiply-adds per term. ``terms`` beyond min(m1 n1, m2 n2) add nothing (the rank of the
    rearranged matrix) and are refused.
    """

    def __init__(self, in_features, out_features, terms, factors=None, bias=False, device=None, dtype=None):
        super().__init__()
        for name, value in (("in_features", in_features), ("out_features", out_features), ("terms", terms)):
            _check_positive(name, value)
        factors = default_kronecker_factors(in_features, out_features) if factors is None else factors
        try:
            (m1, n1), (m2, n2) = ((int(a), int(b)) for a, b in factors)
        except (TypeError, ValueError):
            raise ValueError(f"factors must be ((m1, n1), (m2, n2)), got {factors!r}") from None
        if m1 * m2 != out_features or n1 * n2 != in_features or min(m1, n1, m2, n2) < 1:
            raise ValueError(
                f"factors {factors!r} do not fit {in_features} -> {out_features}: need m1 m2 = {out_features} and "
                f"n1 n2 = {in_features}; e.g. factors={default_kronecker_factors(in_features, out_features)}")
        if terms > min(m1 * n1, m2 * n2):
            raise ValueError(f"terms={terms} exceeds min(m1 n1, m2 n2)={min(m1 * n1, m2 * n2)}, the largest number "
                             "of independent Kronecker terms for these factors; use fewer terms")
        owner = f"KroneckerSumLinear({in_features}, {out_features}, terms={terms})"
        _check_float_dtype(owner, dtype)
        _check_allocation(owner, terms * (m1 * n1 + m2 * n2) + out_features * bool(bias), dtype, device,
                          fix="use fewer terms")
        self.in_features, self.out_features, self.terms = in_features, out_features, terms
        self.factors = ((m1, n1), (m2, n2))
        factory = _bias_and_factory(self, out_features, bias, device, dtype)
        self.left = nn.Parameter(torch.empty(terms, m1, n1, **factory))    # A_k
        self.right = nn.Parameter(torch.empty(terms, m2, n2, **factory))   # B_k
        self.reset_parameters()

    def reset_parameters(self):
        """Uniform(+-1/sqrt(n1)) for A and Uniform(+-1/sqrt(terms n2)) for B (a product of fan-ins
        like nn.Linear's for the whole sum); bias 0."""
        (m1, n1), (m2, n2) = self.factors
        nn.init.uniform_(self.left, -1 / math.sqrt(n1), 1 / math.sqrt(n1))
        bound = 1 / math.sqrt(self.terms * n2)
        nn.init.uniform_(self.right, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x):
        _check_input(self, x)
        (m1, n1), (m2, n2) = self.factors
        xs = x.unflatten(-1, (n1, n2))
        t = torch.einsum("...ab,kcb->...kac", xs, self.right)          # X B_k^T: (..., terms, n1, m2)
        y = torch.einsum("kia,...kac->...ic", self.left, t)            # sum_k A_k (X B_k^T)
        return _finish(self, y.flatten(-2))

    def dense_weight(self) -> torch.Tensor:
        """The equivalent (out, in) matrix sum_k kron(A_k, B_k) (bias excluded)."""
        return sum(torch.kron(a, b) for a, b in zip(self.left, self.right))

    @torch.no_grad()
    def load_nearest(self, weight: torch.Tensor) -> torch.Tensor:
        """Set A, B to :func:`nearest_kronecker_sum` of ``weight`` (out, in); returns its singular values."""
        a, b, s = nearest_kronecker_sum(torch.as_tensor(weight).to(torch.float64), self.terms, self.factors)
        self.left.copy_(a)
        self.right.copy_(b)
        return s

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, terms={self.terms}, "
                f"factors={self.factors}, bias={self.bias is not None}")


def _monarch_shape(in_features, out_features, blocks):
    if in_features % blocks or out_features % blocks:
        common = [b for b in range(1, min(in_features, out_features) + 1)
                  if in_features % b == 0 and out_features % b == 0]
        raise ValueError(f"blocks={blocks} must divide both in_features={in_features} and out_features="
                         f"{out_features}; common divisors: {common}")
    return in_features // blocks, out_features // blocks


def monarch_projection(weight: torch.Tensor, blocks: int):
    r"""The Frobenius-nearest Monarch matrix (:class:`MonarchLinear` with ``blocks``) to ``weight``.

    Entry W[h q + a, g p + t] of a Monarch matrix is L[a, h, g] R[g, a, t] (see
    :class:`MonarchLinear`), so for every (a, g) the b x p sub-matrix
    :math:`S_{ag}[h, t] = W[h q + a, g p + t]` is the outer product of L[a, :, g] and
    R[g, a, :]; the q b sub-matrices partition the entries of W, and a matrix is Monarch iff
    every S_ag has rank <= 1. The nearest one therefore takes, for each (a, g) separately, the
    best rank-1 approximation :math:`\sigma_1 u_1 v_1^\top` of S_ag (Eckart-Young):
    L[a, :, g] = sqrt(sigma_1) u_1, R[g, a, :] = sqrt(sigma_1) v_1. It is exact (zero error) for a
    Monarch matrix. Returns (L (q, b, b), R (b, q, p)).
    """
    d_out, d_in = weight.shape
    p, q = _monarch_shape(d_in, d_out, blocks)
    s = weight.reshape(blocks, q, blocks, p).permute(1, 2, 0, 3)      # (a, g, h, t)
    u, sv, vh = torch.linalg.svd(s, full_matrices=False)
    root = sv[..., 0].sqrt()                                            # (a, g)
    left = (u[..., :, 0] * root[..., None]).permute(0, 2, 1)            # L[a, h, g]
    right = (vh[..., 0, :] * root[..., None]).permute(1, 0, 2)          # R[g, a, t]
    return left.contiguous(), right.contiguous()


class MonarchLinear(nn.Module):
    r"""Monarch matrix y = P_o L P_m R x (Dao et al., "Monarch: expressive structured matrices for
    efficient and accurate training", ICML 2022), for ``blocks`` b dividing both widths.

    With p = in/b and q = out/b: R is block-diagonal with b blocks of q x p (x viewed as (b, p),
    block g maps x[g] to u[g] in R^q); P_m is the reshape-transpose permutation (b, q) -> (q, b);
    L is block-diagonal with q blocks of b x b (block a mixes the b values u[:, a]); P_o
    transposes (q, b) back, so y[h q + a] = sum_g L[a, h, g] u[g, a] and
    :math:`W[hq + a, gp + t] = L[a, h, g]\,R[g, a, t]`. For a square d = b^2 this is the square
    Monarch class with b blocks of b x b on both sides. Parameters (= multiply-adds per token):
    b q p + q b^2 = out in / b + out b, smallest at b = sqrt(in) (2 d^1.5 for d x d).
    """

    def __init__(self, in_features, out_features, blocks, bias=False, device=None, dtype=None):
        super().__init__()
        for name, value in (("in_features", in_features), ("out_features", out_features), ("blocks", blocks)):
            _check_positive(name, value)
        p, q = _monarch_shape(in_features, out_features, blocks)
        owner = f"MonarchLinear({in_features}, {out_features}, blocks={blocks})"
        _check_float_dtype(owner, dtype)
        _check_allocation(owner, monarch_parameters(in_features, out_features, blocks, bias), dtype, device,
                          fix="use a number of blocks near sqrt(in_features)")
        self.in_features, self.out_features, self.blocks = in_features, out_features, blocks
        self.block_in, self.block_out = p, q
        factory = _bias_and_factory(self, out_features, bias, device, dtype)
        self.right = nn.Parameter(torch.empty(blocks, q, p, **factory))        # R[g, a, t]
        self.left = nn.Parameter(torch.empty(q, blocks, blocks, **factory))    # L[a, h, g]
        self.reset_parameters()

    def reset_parameters(self):
        """Uniform(+-1/sqrt(fan_in)) per factor (fan_in p for R, b for L); bias 0."""
        nn.init.uniform_(self.right, -1 / math.sqrt(self.block_in), 1 / math.sqrt(self.block_in))
        nn.init.uniform_(self.left, -1 / math.sqrt(self.blocks), 1 / math.sqrt(self.blocks))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x):
        _check_input(self, x)
        u = torch.einsum("...gt,gat->...ga", x.unflatten(-1, (self.blocks, self.block_in)), self.right)
        y = torch.einsum("...ga,ahg->...ha", u, self.left)
        return _finish(self, y.flatten(-2))

    def dense_weight(self) -> torch.Tensor:
        """The equivalent (out, in) matrix W[h q + a, g p + t] = L[a, h, g] R[g, a, t] (bias excluded)."""
        w = torch.einsum("ahg,gat->hagt", self.left, self.right)
        return w.reshape(self.out_features, self.in_features)

    @torch.no_grad()
    def load_nearest(self, weight: torch.Tensor) -> None:
        """Set L, R to :func:`monarch_projection` of ``weight`` (out, in)."""
        left, right = monarch_projection(torch.as_tensor(weight).to(torch.float64), self.blocks)
        self.left.copy_(left)
        self.right.copy_(right)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, blocks={self.blocks}, "
                f"bias={self.bias is not None}")


class MixedBlockHadamardLinear(nn.Module):
    r"""Block-diagonal map whose output blocks are mixed by a Hadamard transform:

    .. math::

        y = Q\,\mathrm{diag}(B_1, \dots, B_b)\,[x; 0] + \text{bias}, \qquad
        Q = \frac{H_b}{\sqrt b} \otimes I_{q},

    H_b the Sylvester-Hadamard matrix of order b (a power of two), q = out/b (b must divide out;
    the output is never cut, so Q stays orthogonal), x zero-padded to b ceil(in/b) features,
    B_g (q, ceil(in/b)). Output coordinate (g, a) = g q + a receives
    :math:`\sum_{g'} H_b[g, g'] (B_{g'} x_{g'})_a / \sqrt b`: every block reaches every output
    block. The Hadamard stage runs (unlike the authors' BH1, where it never did). Parameters:
    b q ceil(in/b); multiply-adds per token: the same, plus out log2(b) additions.

    Because Q is orthogonal, :math:`\|y - Q D x\| = \|Q^\top y - D x\|`: the least-squares fit
    of D is the block fit to the transformed targets Q^T y
    (:func:`galinear.compress.fitting.closed_form.fit_module`).
    """

    def __init__(self, in_features, out_features, blocks, bias=False, device=None, dtype=None):
        super().__init__()
        for name, value in (("in_features", in_features), ("out_features", out_features), ("blocks", blocks)):
            _check_positive(name, value)
        if blocks & (blocks - 1) or out_features % blocks or blocks > in_features:
            powers = [2**i for i in range(out_features.bit_length())
                      if out_features % 2**i == 0 and 2**i <= in_features]
            raise ValueError(f"blocks={blocks} must be a power of two dividing out_features={out_features} and at most "
                             f"in_features={in_features} (the Hadamard transform mixes whole output blocks); "
                             f"choose one of {powers}")
        self.in_features, self.out_features, self.blocks = in_features, out_features, blocks
        self.block_in, self.block_out = -(-in_features // blocks), out_features // blocks
        self.padded_in = self.block_in * blocks
        owner = f"MixedBlockHadamardLinear({in_features}, {out_features}, blocks={blocks})"
        _check_float_dtype(owner, dtype)
        _check_allocation(owner, out_features * (self.block_in + bool(bias)), dtype, device,
                          fix="use more blocks or smaller widths")
        factory = _bias_and_factory(self, out_features, bias, device, dtype)
        self.first = nn.Parameter(torch.empty(blocks, self.block_out, self.block_in, **factory))
        self.reset_parameters()

    def reset_parameters(self):
        """Uniform(+-1/sqrt(block_in)) per block; bias 0."""
        nn.init.uniform_(self.first, -1 / math.sqrt(self.block_in), 1 / math.sqrt(self.block_in))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def mix(self, h: torch.Tensor) -> torch.Tensor:
        """Q h for h (..., out): the orthonormal Hadamard transform across the blocks."""
        blocks = h.unflatten(-1, (self.blocks, self.block_out)).transpose(-1, -2)   # (..., q, b)
        return fwht(blocks.contiguous(), self.blocks).transpose(-1, -2).flatten(-2)

    def mixing_matrix(self, dtype=None, device=None) -> torch.Tensor:
        """Q (out, out), orthogonal and symmetric."""
        return self.mix(torch.eye(self.out_features, dtype=dtype or self.first.dtype, device=device)).t()

    def forward(self, x):
        _check_input(self, x)
        if self.padded_in != self.in_features:
            x = nn.functional.pad(x, (0, self.padded_in - self.in_features))
        h = torch.einsum("...gi,goi->...go", x.unflatten(-1, (self.blocks, self.block_in)), self.first)
        return _finish(self, self.mix(h.flatten(-2)))

    def block_matrix(self) -> torch.Tensor:
        """D: the (out, in) block-diagonal matrix before the mixing (padding cut)."""
        d = torch.block_diag(*self.first)
        return d[:, : self.in_features]

    def dense_weight(self) -> torch.Tensor:
        """The equivalent (out, in) matrix Q D (bias excluded)."""
        return self.mix(self.block_matrix().t()).t()

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, blocks={self.blocks}, "
                f"bias={self.bias is not None}")
