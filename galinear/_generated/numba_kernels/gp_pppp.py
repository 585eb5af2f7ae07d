"""Generated kernel: geometric product out = a b in Cl(4,0,0), metric (1, 1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1, 1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 4 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(a, b, out):
    """geometric product out = a b in Cl(4,0,0), metric (1, 1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if a.shape[1] != 16 or b.shape[1] != 16 or out.shape[1] != 16:
        raise ValueError("wrong row widths: expected a: 16, b: 16, out: 16")
    if a.shape[0] != out.shape[0] or b.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    a_t = np.empty((16, 64), dtype=a.dtype)
    b_t = np.empty((16, 64), dtype=b.dtype)
    out_t = np.empty((16, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(16):
                value = a[start + row, col]
                a_t[col, row] = value
                probe += value - value
            for col in range(16):
                value = b[start + row, col]
                b_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            a0 = a_t[0, row]
            a1 = a_t[1, row]
            a2 = a_t[2, row]
            a3 = a_t[3, row]
            a4 = a_t[4, row]
            a5 = a_t[5, row]
            a6 = a_t[6, row]
            a7 = a_t[7, row]
            a8 = a_t[8, row]
            a9 = a_t[9, row]
            a10 = a_t[10, row]
            a11 = a_t[11, row]
            a12 = a_t[12, row]
            a13 = a_t[13, row]
            a14 = a_t[14, row]
            a15 = a_t[15, row]
            b0 = b_t[0, row]
            b1 = b_t[1, row]
            b2 = b_t[2, row]
            b3 = b_t[3, row]
            b4 = b_t[4, row]
            b5 = b_t[5, row]
            b6 = b_t[6, row]
            b7 = b_t[7, row]
            b8 = b_t[8, row]
            b9 = b_t[9, row]
            b10 = b_t[10, row]
            b11 = b_t[11, row]
            b12 = b_t[12, row]
            b13 = b_t[13, row]
            b14 = b_t[14, row]
            b15 = b_t[15, row]
            out_t[0, row] = (a0 * b0 + a1 * b1 - a10 * b10 - a11 * b11 - a12 * b12 - a13 * b13 - a14 * b14 + a15 * b15 + a2 * b2 + a3 * b3 + a4 * b4 - a5 * b5 - a6 * b6 - a7 * b7 - a8 * b8 - a9 * b9)
            out_t[1, row] = (a0 * b1 + a1 * b0 - a10 * b13 - a11 * b8 - a12 * b9 - a13 * b10 + a14 * b15 - a15 * b14 - a2 * b5 - a3 * b6 - a4 * b7 + a5 * b2 + a6 * b3 + a7 * b4 - a8 * b11 - a9 * b12)
            out_t[2, row] = (a0 * b2 + a1 * b5 - a10 * b14 + a11 * b6 + a12 * b7 - a13 * b15 - a14 * b10 + a15 * b13 + a2 * b0 - a3 * b8 - a4 * b9 - a5 * b1 + a6 * b11 + a7 * b12 + a8 * b3 + a9 * b4)
            out_t[3, row] = (a0 * b3 + a1 * b6 + a10 * b4 - a11 * b5 + a12 * b15 + a13 * b7 + a14 * b9 - a15 * b12 + a2 * b8 + a3 * b0 - a4 * b10 - a5 * b11 - a6 * b1 + a7 * b13 - a8 * b2 + a9 * b14)
            out_t[4, row] = (a0 * b4 + a1 * b7 - a10 * b3 - a11 * b15 - a12 * b5 - a13 * b6 - a14 * b8 + a15 * b11 + a2 * b9 + a3 * b10 + a4 * b0 - a5 * b12 - a6 * b13 - a7 * b1 - a8 * b14 - a9 * b2)
            out_t[5, row] = (a0 * b5 + a1 * b2 - a10 * b15 + a11 * b3 + a12 * b4 - a13 * b14 + a14 * b13 - a15 * b10 - a2 * b1 + a3 * b11 + a4 * b12 + a5 * b0 - a6 * b8 - a7 * b9 + a8 * b6 + a9 * b7)
            out_t[6, row] = (a0 * b6 + a1 * b3 + a10 * b7 - a11 * b2 + a12 * b14 + a13 * b4 - a14 * b12 + a15 * b9 - a2 * b11 - a3 * b1 + a4 * b13 + a5 * b8 + a6 * b0 - a7 * b10 - a8 * b5 + a9 * b15)
            out_t[7, row] = (a0 * b7 + a1 * b4 - a10 * b6 - a11 * b14 - a12 * b2 - a13 * b3 + a14 * b11 - a15 * b8 - a2 * b12 - a3 * b13 - a4 * b1 + a5 * b9 + a6 * b10 + a7 * b0 - a8 * b15 - a9 * b5)
            out_t[8, row] = (a0 * b8 + a1 * b11 + a10 * b9 + a11 * b1 - a12 * b13 + a13 * b12 + a14 * b4 - a15 * b7 + a2 * b3 - a3 * b2 + a4 * b14 - a5 * b6 + a6 * b5 - a7 * b15 + a8 * b0 - a9 * b10)
            out_t[9, row] = (a0 * b9 + a1 * b12 - a10 * b8 + a11 * b13 + a12 * b1 - a13 * b11 - a14 * b3 + a15 * b6 + a2 * b4 - a3 * b14 - a4 * b2 - a5 * b7 + a6 * b15 + a7 * b5 + a8 * b10 + a9 * b0)
            out_t[10, row] = (a0 * b10 + a1 * b13 + a10 * b0 - a11 * b12 + a12 * b11 + a13 * b1 + a14 * b2 - a15 * b5 + a2 * b14 + a3 * b4 - a4 * b3 - a5 * b15 - a6 * b7 + a7 * b6 - a8 * b9 + a9 * b8)
            out_t[11, row] = (a0 * b11 + a1 * b8 + a10 * b12 + a11 * b0 - a12 * b10 + a13 * b9 - a14 * b7 + a15 * b4 - a2 * b6 + a3 * b5 - a4 * b15 + a5 * b3 - a6 * b2 + a7 * b14 + a8 * b1 - a9 * b13)
            out_t[12, row] = (a0 * b12 + a1 * b9 - a10 * b11 + a11 * b10 + a12 * b0 - a13 * b8 + a14 * b6 - a15 * b3 - a2 * b7 + a3 * b15 + a4 * b5 + a5 * b4 - a6 * b14 - a7 * b2 + a8 * b13 + a9 * b1)
            out_t[13, row] = (a0 * b13 + a1 * b10 + a10 * b1 - a11 * b9 + a12 * b8 + a13 * b0 - a14 * b5 + a15 * b2 - a2 * b15 - a3 * b7 + a4 * b6 + a5 * b14 + a6 * b4 - a7 * b3 - a8 * b12 + a9 * b11)
            out_t[14, row] = (a0 * b14 + a1 * b15 + a10 * b2 + a11 * b7 - a12 * b6 + a13 * b5 + a14 * b0 - a15 * b1 + a2 * b10 - a3 * b9 + a4 * b8 - a5 * b13 + a6 * b12 - a7 * b11 + a8 * b4 - a9 * b3)
            out_t[15, row] = (a0 * b15 + a1 * b14 + a10 * b5 + a11 * b4 - a12 * b3 + a13 * b2 - a14 * b1 + a15 * b0 - a2 * b13 + a3 * b12 - a4 * b11 + a5 * b10 - a6 * b9 + a7 * b8 + a8 * b7 - a9 * b6)
            # --- end of body ---
        for row in range(count):
            for col in range(16):
                out[start + row, col] = out_t[col, row]
    return probe == 0
