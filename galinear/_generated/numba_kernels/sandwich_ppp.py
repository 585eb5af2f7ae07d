"""Generated kernel: simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(3,0,0), metric (1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich', metric=(1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich --n 3 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(r, x, out):
    """simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(3,0,0), metric (1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 4 or x.shape[1] != 8 or out.shape[1] != 8:
        raise ValueError("wrong row widths: expected r: 4, x: 8, out: 8")
    if r.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    r_t = np.empty((4, 64), dtype=r.dtype)
    x_t = np.empty((8, 64), dtype=x.dtype)
    out_t = np.empty((8, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(4):
                value = r[start + row, col]
                r_t[col, row] = value
                probe += value - value
            for col in range(8):
                value = x[start + row, col]
                x_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            r0 = r_t[0, row]
            r1 = r_t[1, row]
            r2 = r_t[2, row]
            r3 = r_t[3, row]
            x0 = x_t[0, row]
            x1 = x_t[1, row]
            x2 = x_t[2, row]
            x3 = x_t[3, row]
            x4 = x_t[4, row]
            x5 = x_t[5, row]
            x6 = x_t[6, row]
            x7 = x_t[7, row]
            t0 = r0*x0 - r1*x4 - r2*x5 - r3*x6
            t1 = r0*x1 + r1*x2 + r2*x3 - r3*x7
            t2 = r0*x2 - r1*x1 + r2*x7 + r3*x3
            t3 = r0*x3 - r1*x7 - r2*x1 - r3*x2
            t4 = r0*x4 + r1*x0 - r2*x6 + r3*x5
            t5 = r0*x5 + r1*x6 + r2*x0 - r3*x4
            t6 = r0*x6 - r1*x5 + r2*x4 + r3*x0
            t7 = r0*x7 + r1*x3 - r2*x2 + r3*x1
            out_t[0, row] = r0*t0 + r1*t4 + r2*t5 + r3*t6
            out_t[1, row] = r0*t1 + r1*t2 + r2*t3 + r3*t7
            out_t[2, row] = r0*t2 - r1*t1 - r2*t7 + r3*t3
            out_t[3, row] = r0*t3 + r1*t7 - r2*t1 - r3*t2
            out_t[4, row] = r0*t4 - r1*t0 - r2*t6 + r3*t5
            out_t[5, row] = r0*t5 + r1*t6 - r2*t0 - r3*t4
            out_t[6, row] = r0*t6 - r1*t5 + r2*t4 - r3*t0
            out_t[7, row] = r0*t7 - r1*t3 + r2*t2 - r3*t1
            # --- end of body ---
        for row in range(count):
            for col in range(8):
                out[start + row, col] = out_t[col, row]
    return probe == 0
