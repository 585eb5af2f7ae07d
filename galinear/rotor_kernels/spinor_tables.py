"""Index tables of the matrix representation of Cl(n) read by the spinor kernels
(:mod:`galinear.rotor_kernels.spinor`) and checked by :mod:`galinear.rotor_kernels.bounds`."""
from __future__ import annotations

import numpy as np

from galinear.matrix_rep import placement, representation

_TABLES: dict = {}


def kernel_tables(n: int, dtype):
    """Index tables of Cl(n) for real ``dtype``: (src, sgn, back, tgt, sgnc, scale).

    A token's working buffer u holds the real parts of the N x N matrix (rows z, columns x of the
    Pauli strings) and then the imaginary parts. Each phase i**p is +-1 or +-i, so coefficient c
    lands in one entry ``tgt[rho, c]`` of u with sign ``sgnc[rho, c]``; read as a gather, entry q
    of u is ``sgn[rho, 0, q] x[src[rho, 0, q]] + sgn[rho, 1, q] x[src[rho, 1, q]]`` (at most two
    coefficients share an entry; absent ones have sign 0). After the Walsh-Hadamard transform
    along the rows, u[i, c] is the matrix entry (i, i xor c); ``back[r * N + j]`` is the q = i * N + c
    of the entry at row r and column j of the block order.
    """
    key = (n, np.dtype(dtype).str)
    if key not in _TABLES:
        tab = representation(n)
        N = tab.N
        NN = N * N
        back = np.ascontiguousarray(placement(n))
        d = 1 << n
        imag = np.abs(tab.phase.imag) > 0.5                                    # (irreps, d)
        tgt = (tab.slot[None, :] + np.where(imag, NN, 0)).astype(np.int64)
        sgnc = np.where(imag, tab.phase.imag, tab.phase.real).round().astype(dtype)
        parts = 1 if tab.real else 2
        src = np.zeros((tab.irreps, 2, parts * NN), dtype=np.int64)
        sgn = np.zeros((tab.irreps, 2, parts * NN), dtype=dtype)
        for rho in range(tab.irreps):
            filled = np.zeros(parts * NN, dtype=np.int64)
            for coefficient in range(d):
                q = tgt[rho, coefficient]
                src[rho, filled[q], q] = coefficient
                sgn[rho, filled[q], q] = sgnc[rho, coefficient]
                filled[q] += 1
        _TABLES[key] = (src, sgn, back, tgt, sgnc, float(tab.scale))
    return _TABLES[key]
