"""Generated kernel: geometric product out = a b in Cl(5,0,0), metric (1, 1, 1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1, 1, 1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 5 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(a, b, out):
    """geometric product out = a b in Cl(5,0,0), metric (1, 1, 1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if a.shape[1] != 32 or b.shape[1] != 32 or out.shape[1] != 32:
        raise ValueError("wrong row widths: expected a: 32, b: 32, out: 32")
    if a.shape[0] != out.shape[0] or b.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    a_t = np.empty((32, 64), dtype=a.dtype)
    b_t = np.empty((32, 64), dtype=b.dtype)
    out_t = np.empty((32, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(32):
                value = a[start + row, col]
                a_t[col, row] = value
                probe += value - value
            for col in range(32):
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
            a16 = a_t[16, row]
            a17 = a_t[17, row]
            a18 = a_t[18, row]
            a19 = a_t[19, row]
            a20 = a_t[20, row]
            a21 = a_t[21, row]
            a22 = a_t[22, row]
            a23 = a_t[23, row]
            a24 = a_t[24, row]
            a25 = a_t[25, row]
            a26 = a_t[26, row]
            a27 = a_t[27, row]
            a28 = a_t[28, row]
            a29 = a_t[29, row]
            a30 = a_t[30, row]
            a31 = a_t[31, row]
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
            b16 = b_t[16, row]
            b17 = b_t[17, row]
            b18 = b_t[18, row]
            b19 = b_t[19, row]
            b20 = b_t[20, row]
            b21 = b_t[21, row]
            b22 = b_t[22, row]
            b23 = b_t[23, row]
            b24 = b_t[24, row]
            b25 = b_t[25, row]
            b26 = b_t[26, row]
            b27 = b_t[27, row]
            b28 = b_t[28, row]
            b29 = b_t[29, row]
            b30 = b_t[30, row]
            b31 = b_t[31, row]
            out_t[0, row] = (a0 * b0 + a1 * b1 - a10 * b10 - a11 * b11 - a12 * b12 - a13 * b13 - a14 * b14 - a15 * b15 - a16 * b16 - a17 * b17 - a18 * b18 - a19 * b19 + a2 * b2 - a20 * b20 - a21 * b21 - a22 * b22 - a23 * b23 - a24 * b24 - a25 * b25 + a26 * b26 + a27 * b27 + a28 * b28 + a29 * b29 + a3 * b3 + a30 * b30 + a31 * b31 + a4 * b4 + a5 * b5 - a6 * b6 - a7 * b7 - a8 * b8 - a9 * b9)
            out_t[1, row] = (a0 * b1 + a1 * b0 - a10 * b16 - a11 * b17 - a12 * b18 - a13 * b19 - a14 * b20 - a15 * b21 - a16 * b10 - a17 * b11 - a18 * b12 - a19 * b13 - a2 * b6 - a20 * b14 - a21 * b15 + a22 * b26 + a23 * b27 + a24 * b28 + a25 * b29 - a26 * b22 - a27 * b23 - a28 * b24 - a29 * b25 - a3 * b7 + a30 * b31 + a31 * b30 - a4 * b8 - a5 * b9 + a6 * b2 + a7 * b3 + a8 * b4 + a9 * b5)
            out_t[2, row] = (a0 * b2 + a1 * b6 + a10 * b3 + a11 * b4 + a12 * b5 - a13 * b22 - a14 * b23 - a15 * b24 + a16 * b7 + a17 * b8 + a18 * b9 - a19 * b26 + a2 * b0 - a20 * b27 - a21 * b28 - a22 * b13 - a23 * b14 - a24 * b15 + a25 * b30 + a26 * b19 + a27 * b20 + a28 * b21 - a29 * b31 - a3 * b10 - a30 * b25 - a31 * b29 - a4 * b11 - a5 * b12 - a6 * b1 + a7 * b16 + a8 * b17 + a9 * b18)
            out_t[3, row] = (a0 * b3 + a1 * b7 - a10 * b2 + a11 * b22 + a12 * b23 + a13 * b4 + a14 * b5 - a15 * b25 - a16 * b6 + a17 * b26 + a18 * b27 + a19 * b8 + a2 * b10 + a20 * b9 - a21 * b29 + a22 * b11 + a23 * b12 - a24 * b30 - a25 * b15 - a26 * b17 - a27 * b18 + a28 * b31 + a29 * b21 + a3 * b0 + a30 * b24 + a31 * b28 - a4 * b13 - a5 * b14 - a6 * b16 - a7 * b1 + a8 * b19 + a9 * b20)
            out_t[4, row] = (a0 * b4 + a1 * b8 - a10 * b22 - a11 * b2 + a12 * b24 - a13 * b3 + a14 * b25 + a15 * b5 - a16 * b26 - a17 * b6 + a18 * b28 - a19 * b7 + a2 * b11 + a20 * b29 + a21 * b9 - a22 * b10 + a23 * b30 + a24 * b12 + a25 * b14 + a26 * b16 - a27 * b31 - a28 * b18 - a29 * b20 + a3 * b13 - a30 * b23 - a31 * b27 + a4 * b0 - a5 * b15 - a6 * b17 - a7 * b19 - a8 * b1 + a9 * b21)
            out_t[5, row] = (a0 * b5 + a1 * b9 - a10 * b23 - a11 * b24 - a12 * b2 - a13 * b25 - a14 * b3 - a15 * b4 - a16 * b27 - a17 * b28 - a18 * b6 - a19 * b29 + a2 * b12 - a20 * b7 - a21 * b8 - a22 * b30 - a23 * b10 - a24 * b11 - a25 * b13 + a26 * b31 + a27 * b16 + a28 * b17 + a29 * b19 + a3 * b14 + a30 * b22 + a31 * b26 + a4 * b15 + a5 * b0 - a6 * b18 - a7 * b20 - a8 * b21 - a9 * b1)
            out_t[6, row] = (a0 * b6 + a1 * b2 + a10 * b7 + a11 * b8 + a12 * b9 - a13 * b26 - a14 * b27 - a15 * b28 + a16 * b3 + a17 * b4 + a18 * b5 - a19 * b22 - a2 * b1 - a20 * b23 - a21 * b24 + a22 * b19 + a23 * b20 + a24 * b21 - a25 * b31 - a26 * b13 - a27 * b14 - a28 * b15 + a29 * b30 + a3 * b16 - a30 * b29 - a31 * b25 + a4 * b17 + a5 * b18 + a6 * b0 - a7 * b10 - a8 * b11 - a9 * b12)
            out_t[7, row] = (a0 * b7 + a1 * b3 - a10 * b6 + a11 * b26 + a12 * b27 + a13 * b8 + a14 * b9 - a15 * b29 - a16 * b2 + a17 * b22 + a18 * b23 + a19 * b4 - a2 * b16 + a20 * b5 - a21 * b25 - a22 * b17 - a23 * b18 + a24 * b31 + a25 * b21 + a26 * b11 + a27 * b12 - a28 * b30 - a29 * b15 - a3 * b1 + a30 * b28 + a31 * b24 + a4 * b19 + a5 * b20 + a6 * b10 + a7 * b0 - a8 * b13 - a9 * b14)
            out_t[8, row] = (a0 * b8 + a1 * b4 - a10 * b26 - a11 * b6 + a12 * b28 - a13 * b7 + a14 * b29 + a15 * b9 - a16 * b22 - a17 * b2 + a18 * b24 - a19 * b3 - a2 * b17 + a20 * b25 + a21 * b5 + a22 * b16 - a23 * b31 - a24 * b18 - a25 * b20 - a26 * b10 + a27 * b30 + a28 * b12 + a29 * b14 - a3 * b19 - a30 * b27 - a31 * b23 - a4 * b1 + a5 * b21 + a6 * b11 + a7 * b13 + a8 * b0 - a9 * b15)
            out_t[9, row] = (a0 * b9 + a1 * b5 - a10 * b27 - a11 * b28 - a12 * b6 - a13 * b29 - a14 * b7 - a15 * b8 - a16 * b23 - a17 * b24 - a18 * b2 - a19 * b25 - a2 * b18 - a20 * b3 - a21 * b4 + a22 * b31 + a23 * b16 + a24 * b17 + a25 * b19 - a26 * b30 - a27 * b10 - a28 * b11 - a29 * b13 - a3 * b20 + a30 * b26 + a31 * b22 - a4 * b21 - a5 * b1 + a6 * b12 + a7 * b14 + a8 * b15 + a9 * b0)
            out_t[10, row] = (a0 * b10 + a1 * b16 + a10 * b0 - a11 * b13 - a12 * b14 + a13 * b11 + a14 * b12 - a15 * b30 + a16 * b1 - a17 * b19 - a18 * b20 + a19 * b17 + a2 * b3 + a20 * b18 - a21 * b31 + a22 * b4 + a23 * b5 - a24 * b25 + a25 * b24 - a26 * b8 - a27 * b9 + a28 * b29 - a29 * b28 - a3 * b2 - a30 * b15 - a31 * b21 + a4 * b22 + a5 * b23 - a6 * b7 + a7 * b6 - a8 * b26 - a9 * b27)
            out_t[11, row] = (a0 * b11 + a1 * b17 + a10 * b13 + a11 * b0 - a12 * b15 - a13 * b10 + a14 * b30 + a15 * b12 + a16 * b19 + a17 * b1 - a18 * b21 - a19 * b16 + a2 * b4 + a20 * b31 + a21 * b18 - a22 * b3 + a23 * b25 + a24 * b5 - a25 * b23 + a26 * b7 - a27 * b29 - a28 * b9 + a29 * b27 - a3 * b22 + a30 * b14 + a31 * b20 - a4 * b2 + a5 * b24 - a6 * b8 + a7 * b26 + a8 * b6 - a9 * b28)
            out_t[12, row] = (a0 * b12 + a1 * b18 + a10 * b14 + a11 * b15 + a12 * b0 - a13 * b30 - a14 * b10 - a15 * b11 + a16 * b20 + a17 * b21 + a18 * b1 - a19 * b31 + a2 * b5 - a20 * b16 - a21 * b17 - a22 * b25 - a23 * b3 - a24 * b4 + a25 * b22 + a26 * b29 + a27 * b7 + a28 * b8 - a29 * b26 - a3 * b23 - a30 * b13 - a31 * b19 - a4 * b24 - a5 * b2 - a6 * b9 + a7 * b27 + a8 * b28 + a9 * b6)
            out_t[13, row] = (a0 * b13 + a1 * b19 - a10 * b11 + a11 * b10 - a12 * b30 + a13 * b0 - a14 * b15 + a15 * b14 - a16 * b17 + a17 * b16 - a18 * b31 + a19 * b1 + a2 * b22 - a20 * b21 + a21 * b20 + a22 * b2 - a23 * b24 + a24 * b23 + a25 * b5 - a26 * b6 + a27 * b28 - a28 * b27 - a29 * b9 + a3 * b4 - a30 * b12 - a31 * b18 - a4 * b3 + a5 * b25 - a6 * b26 - a7 * b8 + a8 * b7 - a9 * b29)
            out_t[14, row] = (a0 * b14 + a1 * b20 - a10 * b12 + a11 * b30 + a12 * b10 + a13 * b15 + a14 * b0 - a15 * b13 - a16 * b18 + a17 * b31 + a18 * b16 + a19 * b21 + a2 * b23 + a20 * b1 - a21 * b19 + a22 * b24 + a23 * b2 - a24 * b22 - a25 * b4 - a26 * b28 - a27 * b6 + a28 * b26 + a29 * b8 + a3 * b5 + a30 * b11 + a31 * b17 - a4 * b25 - a5 * b3 - a6 * b27 - a7 * b9 + a8 * b29 + a9 * b7)
            out_t[15, row] = (a0 * b15 + a1 * b21 - a10 * b30 - a11 * b12 + a12 * b11 - a13 * b14 + a14 * b13 + a15 * b0 - a16 * b31 - a17 * b18 + a18 * b17 - a19 * b20 + a2 * b24 + a20 * b19 + a21 * b1 - a22 * b23 + a23 * b22 + a24 * b2 + a25 * b3 + a26 * b27 - a27 * b26 - a28 * b6 - a29 * b7 + a3 * b25 - a30 * b10 - a31 * b16 + a4 * b5 - a5 * b4 - a6 * b28 - a7 * b29 - a8 * b9 + a9 * b8)
            out_t[16, row] = (a0 * b16 + a1 * b10 + a10 * b1 - a11 * b19 - a12 * b20 + a13 * b17 + a14 * b18 - a15 * b31 + a16 * b0 - a17 * b13 - a18 * b14 + a19 * b11 - a2 * b7 + a20 * b12 - a21 * b30 - a22 * b8 - a23 * b9 + a24 * b29 - a25 * b28 + a26 * b4 + a27 * b5 - a28 * b25 + a29 * b24 + a3 * b6 - a30 * b21 - a31 * b15 - a4 * b26 - a5 * b27 + a6 * b3 - a7 * b2 + a8 * b22 + a9 * b23)
            out_t[17, row] = (a0 * b17 + a1 * b11 + a10 * b19 + a11 * b1 - a12 * b21 - a13 * b16 + a14 * b31 + a15 * b18 + a16 * b13 + a17 * b0 - a18 * b15 - a19 * b10 - a2 * b8 + a20 * b30 + a21 * b12 + a22 * b7 - a23 * b29 - a24 * b9 + a25 * b27 - a26 * b3 + a27 * b25 + a28 * b5 - a29 * b23 + a3 * b26 + a30 * b20 + a31 * b14 + a4 * b6 - a5 * b28 + a6 * b4 - a7 * b22 - a8 * b2 + a9 * b24)
            out_t[18, row] = (a0 * b18 + a1 * b12 + a10 * b20 + a11 * b21 + a12 * b1 - a13 * b31 - a14 * b16 - a15 * b17 + a16 * b14 + a17 * b15 + a18 * b0 - a19 * b30 - a2 * b9 - a20 * b10 - a21 * b11 + a22 * b29 + a23 * b7 + a24 * b8 - a25 * b26 - a26 * b25 - a27 * b3 - a28 * b4 + a29 * b22 + a3 * b27 - a30 * b19 - a31 * b13 + a4 * b28 + a5 * b6 + a6 * b5 - a7 * b23 - a8 * b24 - a9 * b2)
            out_t[19, row] = (a0 * b19 + a1 * b13 - a10 * b17 + a11 * b16 - a12 * b31 + a13 * b1 - a14 * b21 + a15 * b20 - a16 * b11 + a17 * b10 - a18 * b30 + a19 * b0 - a2 * b26 - a20 * b15 + a21 * b14 - a22 * b6 + a23 * b28 - a24 * b27 - a25 * b9 + a26 * b2 - a27 * b24 + a28 * b23 + a29 * b5 - a3 * b8 - a30 * b18 - a31 * b12 + a4 * b7 - a5 * b29 + a6 * b22 + a7 * b4 - a8 * b3 + a9 * b25)
            out_t[20, row] = (a0 * b20 + a1 * b14 - a10 * b18 + a11 * b31 + a12 * b16 + a13 * b21 + a14 * b1 - a15 * b19 - a16 * b12 + a17 * b30 + a18 * b10 + a19 * b15 - a2 * b27 + a20 * b0 - a21 * b13 - a22 * b28 - a23 * b6 + a24 * b26 + a25 * b8 + a26 * b24 + a27 * b2 - a28 * b22 - a29 * b4 - a3 * b9 + a30 * b17 + a31 * b11 + a4 * b29 + a5 * b7 + a6 * b23 + a7 * b5 - a8 * b25 - a9 * b3)
            out_t[21, row] = (a0 * b21 + a1 * b15 - a10 * b31 - a11 * b18 + a12 * b17 - a13 * b20 + a14 * b19 + a15 * b1 - a16 * b30 - a17 * b12 + a18 * b11 - a19 * b14 - a2 * b28 + a20 * b13 + a21 * b0 + a22 * b27 - a23 * b26 - a24 * b6 - a25 * b7 - a26 * b23 + a27 * b22 + a28 * b2 + a29 * b3 - a3 * b29 - a30 * b16 - a31 * b10 - a4 * b9 + a5 * b8 + a6 * b24 + a7 * b25 + a8 * b5 - a9 * b4)
            out_t[22, row] = (a0 * b22 + a1 * b26 + a10 * b4 - a11 * b3 + a12 * b25 + a13 * b2 - a14 * b24 + a15 * b23 + a16 * b8 - a17 * b7 + a18 * b29 + a19 * b6 + a2 * b13 - a20 * b28 + a21 * b27 + a22 * b0 - a23 * b15 + a24 * b14 - a25 * b12 - a26 * b1 + a27 * b21 - a28 * b20 + a29 * b18 - a3 * b11 + a30 * b5 + a31 * b9 + a4 * b10 - a5 * b30 - a6 * b19 + a7 * b17 - a8 * b16 + a9 * b31)
            out_t[23, row] = (a0 * b23 + a1 * b27 + a10 * b5 - a11 * b25 - a12 * b3 + a13 * b24 + a14 * b2 - a15 * b22 + a16 * b9 - a17 * b29 - a18 * b7 + a19 * b28 + a2 * b14 + a20 * b6 - a21 * b26 + a22 * b15 + a23 * b0 - a24 * b13 + a25 * b11 - a26 * b21 - a27 * b1 + a28 * b19 - a29 * b17 - a3 * b12 - a30 * b4 - a31 * b8 + a4 * b30 + a5 * b10 - a6 * b20 + a7 * b18 - a8 * b31 - a9 * b16)
            out_t[24, row] = (a0 * b24 + a1 * b28 + a10 * b25 + a11 * b5 - a12 * b4 - a13 * b23 + a14 * b22 + a15 * b2 + a16 * b29 + a17 * b9 - a18 * b8 - a19 * b27 + a2 * b15 + a20 * b26 + a21 * b6 - a22 * b14 + a23 * b13 + a24 * b0 - a25 * b10 + a26 * b20 - a27 * b19 - a28 * b1 + a29 * b16 - a3 * b30 + a30 * b3 + a31 * b7 - a4 * b12 + a5 * b11 - a6 * b21 + a7 * b31 + a8 * b18 - a9 * b17)
            out_t[25, row] = (a0 * b25 + a1 * b29 - a10 * b24 + a11 * b23 - a12 * b22 + a13 * b5 - a14 * b4 + a15 * b3 - a16 * b28 + a17 * b27 - a18 * b26 + a19 * b9 + a2 * b30 - a20 * b8 + a21 * b7 + a22 * b12 - a23 * b11 + a24 * b10 + a25 * b0 - a26 * b18 + a27 * b17 - a28 * b16 - a29 * b1 + a3 * b15 - a30 * b2 - a31 * b6 - a4 * b14 + a5 * b13 - a6 * b31 - a7 * b21 + a8 * b20 - a9 * b19)
            out_t[26, row] = (a0 * b26 + a1 * b22 + a10 * b8 - a11 * b7 + a12 * b29 + a13 * b6 - a14 * b28 + a15 * b27 + a16 * b4 - a17 * b3 + a18 * b25 + a19 * b2 - a2 * b19 - a20 * b24 + a21 * b23 - a22 * b1 + a23 * b21 - a24 * b20 + a25 * b18 + a26 * b0 - a27 * b15 + a28 * b14 - a29 * b12 + a3 * b17 + a30 * b9 + a31 * b5 - a4 * b16 + a5 * b31 + a6 * b13 - a7 * b11 + a8 * b10 - a9 * b30)
            out_t[27, row] = (a0 * b27 + a1 * b23 + a10 * b9 - a11 * b29 - a12 * b7 + a13 * b28 + a14 * b6 - a15 * b26 + a16 * b5 - a17 * b25 - a18 * b3 + a19 * b24 - a2 * b20 + a20 * b2 - a21 * b22 - a22 * b21 - a23 * b1 + a24 * b19 - a25 * b17 + a26 * b15 + a27 * b0 - a28 * b13 + a29 * b11 + a3 * b18 - a30 * b8 - a31 * b4 - a4 * b31 - a5 * b16 + a6 * b14 - a7 * b12 + a8 * b30 + a9 * b10)
            out_t[28, row] = (a0 * b28 + a1 * b24 + a10 * b29 + a11 * b9 - a12 * b8 - a13 * b27 + a14 * b26 + a15 * b6 + a16 * b25 + a17 * b5 - a18 * b4 - a19 * b23 - a2 * b21 + a20 * b22 + a21 * b2 + a22 * b20 - a23 * b19 - a24 * b1 + a25 * b16 - a26 * b14 + a27 * b13 + a28 * b0 - a29 * b10 + a3 * b31 + a30 * b7 + a31 * b3 + a4 * b18 - a5 * b17 + a6 * b15 - a7 * b30 - a8 * b12 + a9 * b11)
            out_t[29, row] = (a0 * b29 + a1 * b25 - a10 * b28 + a11 * b27 - a12 * b26 + a13 * b9 - a14 * b8 + a15 * b7 - a16 * b24 + a17 * b23 - a18 * b22 + a19 * b5 - a2 * b31 - a20 * b4 + a21 * b3 - a22 * b18 + a23 * b17 - a24 * b16 - a25 * b1 + a26 * b12 - a27 * b11 + a28 * b10 + a29 * b0 - a3 * b21 - a30 * b6 - a31 * b2 + a4 * b20 - a5 * b19 + a6 * b30 + a7 * b15 - a8 * b14 + a9 * b13)
            out_t[30, row] = (a0 * b30 + a1 * b31 + a10 * b15 - a11 * b14 + a12 * b13 + a13 * b12 - a14 * b11 + a15 * b10 + a16 * b21 - a17 * b20 + a18 * b19 + a19 * b18 + a2 * b25 - a20 * b17 + a21 * b16 + a22 * b5 - a23 * b4 + a24 * b3 - a25 * b2 - a26 * b9 + a27 * b8 - a28 * b7 + a29 * b6 - a3 * b24 + a30 * b0 + a31 * b1 + a4 * b23 - a5 * b22 - a6 * b29 + a7 * b28 - a8 * b27 + a9 * b26)
            out_t[31, row] = (a0 * b31 + a1 * b30 + a10 * b21 - a11 * b20 + a12 * b19 + a13 * b18 - a14 * b17 + a15 * b16 + a16 * b15 - a17 * b14 + a18 * b13 + a19 * b12 - a2 * b29 - a20 * b11 + a21 * b10 - a22 * b9 + a23 * b8 - a24 * b7 + a25 * b6 + a26 * b5 - a27 * b4 + a28 * b3 - a29 * b2 + a3 * b28 + a30 * b1 + a31 * b0 - a4 * b27 + a5 * b26 + a6 * b25 - a7 * b24 + a8 * b23 - a9 * b22)
            # --- end of body ---
        for row in range(count):
            for col in range(32):
                out[start + row, col] = out_t[col, row]
    return probe == 0
