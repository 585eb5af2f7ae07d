"""Generated kernel: geometric product out = a b in Cl(2,0,0), metric (1, 1), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 2 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(a, b, out):
    """geometric product out = a b in Cl(2,0,0), metric (1, 1), shortlex blade order; see galinear._generated for the signature."""
    if a.shape[1] != 4 or b.shape[1] != 4 or out.shape[1] != 4:
        raise ValueError("wrong row widths: expected a: 4, b: 4, out: 4")
    if a.shape[0] != out.shape[0] or b.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    a_t = np.empty((4, 64), dtype=a.dtype)
    b_t = np.empty((4, 64), dtype=b.dtype)
    out_t = np.empty((4, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(4):
                value = a[start + row, col]
                a_t[col, row] = value
                probe += value - value
            for col in range(4):
                value = b[start + row, col]
                b_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            a0 = a_t[0, row]
            a1 = a_t[1, row]
            a2 = a_t[2, row]
            a3 = a_t[3, row]
            b0 = b_t[0, row]
            b1 = b_t[1, row]
            b2 = b_t[2, row]
            b3 = b_t[3, row]
            out_t[0, row] = (a0 * b0 + a1 * b1 + a2 * b2 - a3 * b3)
            out_t[1, row] = (a0 * b1 + a1 * b0 - a2 * b3 + a3 * b2)
            out_t[2, row] = (a0 * b2 + a1 * b3 + a2 * b0 - a3 * b1)
            out_t[3, row] = (a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0)
            # --- end of body ---
        for row in range(count):
            for col in range(4):
                out[start + row, col] = out_t[col, row]
    return probe == 0
