r"""Triton kernels for the transforms of the "spinor" backend (GPU; tested on the CPU with
``TRITON_INTERPRET=1``).

The same maths and layouts as :mod:`galinear.rotor_kernels.spinor`: ``to_matrix`` fills
(P * irreps, N, nb, parts * N) with the matrices of tokens x[start:start + nb] (parts = 2 holds
real and imaginary parts interleaved, a real view of the complex matrices); ``from_matrix`` reads
(H, P * irreps, N, nb, parts * W) and writes the multivectors. One program per (token, chunk pair
and representation): the signed gather of the coefficients, the Walsh-Hadamard transform as one
``tl.dot`` with the N x N Hadamard matrix (exact in IEEE float32: its entries are +-1), and the xor
placement through a scratch row in global memory (a register tensor cannot be gathered).
``tl.dot`` needs N >= 16, so these kernels serve n >= 8 in float32; the torch index operations of
:mod:`galinear.nn.functional.spinor` serve the rest.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from galinear.rotor_kernels.spinor import kernel_tables
from galinear.matrix_rep import hadamard, representation

__all__ = ["supports", "to_matrix", "from_matrix"]


def supports(n: int, dtype: torch.dtype) -> bool:
    """Whether these kernels serve Cl(n) in ``dtype`` (float32, n >= 8)."""
    return dtype == torch.float32 and n >= 8


@triton.jit
def _to_matrix_kernel(x_ptr, src_ptr, sgn_ptr, had_ptr, back_ptr, scratch_ptr, out_ptr, b0, nb, stride_b, stride_p,
                      IRREPS: tl.constexpr, N: tl.constexpr, PARTS: tl.constexpr, SHARED: tl.constexpr):
    t = tl.program_id(0)
    g = tl.program_id(1)
    p = g // IRREPS
    rho = g % IRREPS
    NN: tl.constexpr = N * N
    q = tl.arange(0, NN)
    rows = tl.arange(0, N)
    had = tl.load(had_ptr + rows[:, None] * N + rows[None, :])
    x_row = x_ptr + (b0 + t) * stride_b + p * stride_p
    scratch = scratch_ptr + (g * nb + t) * (PARTS * NN)
    for part in tl.static_range(PARTS):
        # tables (irreps, 2 sources, parts * NN)
        first = rho * (2 * PARTS * NN) + part * NN + q
        u = tl.load(sgn_ptr + first) * tl.load(x_row + tl.load(src_ptr + first))
        if SHARED:
            second = first + PARTS * NN
            u += tl.load(sgn_ptr + second) * tl.load(x_row + tl.load(src_ptr + second))
        hat = tl.dot(had, tl.reshape(u, (N, N)), input_precision="ieee")
        tl.store(scratch + part * NN + q, tl.reshape(hat, (NN,)))
    tl.debug_barrier()
    entry = tl.load(back_ptr + q)                       # (r, j) -> q of the transformed grid
    r = q // N
    j = q % N
    for part in tl.static_range(PARTS):
        value = tl.load(scratch + part * NN + entry)
        tl.store(out_ptr + ((g * N + r) * nb + t) * (PARTS * N) + j * PARTS + part, value)


@triton.jit
def _from_matrix_kernel(y_ptr, tgt_ptr, sgnc_ptr, had_ptr, store_ptr, scratch_ptr, out_ptr, b0, nb, G, scale,
                        IRREPS: tl.constexpr, N: tl.constexpr, H: tl.constexpr, PARTS: tl.constexpr,
                        D: tl.constexpr):
    t = tl.program_id(0)
    p = tl.program_id(1)
    NN: tl.constexpr = N * N
    W: tl.constexpr = N // H
    q = tl.arange(0, NN)
    rows = tl.arange(0, N)
    had = tl.load(had_ptr + rows[:, None] * N + rows[None, :])
    at = tl.load(store_ptr + q)                          # q -> (r, j) of the block order
    r = at // N
    j = at % N
    c = tl.arange(0, D)
    acc = tl.zeros((D,), dtype=tl.float32)
    for rho in tl.static_range(IRREPS):
        g = p * IRREPS + rho
        scratch = scratch_ptr + (g * nb + t) * (PARTS * NN)
        for part in tl.static_range(PARTS):
            address = (((j // W) * G + g) * N + r) * nb * (PARTS * W) + t * (PARTS * W) + (j % W) * PARTS + part
            u = tl.load(y_ptr + address)
            hat = tl.dot(had, tl.reshape(u, (N, N)), input_precision="ieee")
            tl.store(scratch + part * NN + q, tl.reshape(hat, (NN,)))
        tl.debug_barrier()
        acc += tl.load(sgnc_ptr + rho * D + c) * tl.load(scratch + tl.load(tgt_ptr + rho * D + c))
    tl.store(out_ptr + ((b0 + t) * (G // IRREPS) + p) * D + c, acc / scale)


_TABLES: dict = {}


def _tables(n: int, device):
    key = (n, str(device))
    if key not in _TABLES:
        src, sgn, back, tgt, sgnc, scale = kernel_tables(n, np.float32)
        store = np.empty_like(back)
        store[back] = np.arange(back.size)
        N = representation(n).N
        _TABLES[key] = tuple(torch.from_numpy(np.array(a)).to(device) for a in
                             (src, sgn, back, tgt, sgnc, store, hadamard(N).astype(np.float32))) + (scale,)
    return _TABLES[key]


def _launch(x: torch.Tensor, matrices: torch.Tensor):
    """(representation, tables, parts, real view of ``matrices``) for multivectors x (B, P, 2**n)."""
    tab = representation(x.shape[-1].bit_length() - 1)
    parts = 1 if tab.real else 2
    return tab, _tables(tab.n, x.device), parts, torch.view_as_real(matrices) if matrices.is_complex() else matrices


def to_matrix(x: torch.Tensor, start: int, out: torch.Tensor) -> torch.Tensor:
    """out (P * irreps, N, nb, N) float32 or complex64 = matrices of tokens x[start:start + nb]."""
    tab, (src, sgn, back, _, _, _, had, _), parts, flat = _launch(x, out)
    G, nb = out.shape[0], out.shape[2]
    x = x.contiguous()
    scratch = torch.empty(G * nb * parts * tab.N * tab.N, dtype=torch.float32, device=x.device)
    _to_matrix_kernel[(nb, G)](x, src, sgn, had, back, scratch, flat, start, nb, x.stride(0), x.stride(1),
                               IRREPS=tab.irreps, N=tab.N, PARTS=parts, SHARED=bool(sgn[:, 1].any()))
    return out


def from_matrix(Y: torch.Tensor, y: torch.Tensor, start: int) -> None:
    """y[start:start + nb] = multivectors of Y (H, P * irreps, N, nb, W), float32 or complex64."""
    B, P, d = y.shape
    tab, (_, _, _, tgt, sgnc, store, had, scale), parts, flat = _launch(y, Y)
    flat = flat.contiguous()
    G, nb = Y.shape[1], Y.shape[3]
    scratch = torch.empty(G * nb * parts * tab.N * tab.N, dtype=torch.float32, device=y.device)
    _from_matrix_kernel[(nb, P)](flat, tgt, sgnc, had, store, scratch, y, start, nb, G, float(scale),
                                 IRREPS=tab.irreps, N=tab.N, H=tab.blocks, PARTS=parts, D=d)
