"""Generated kernel: simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(4,0,0), metric (1, 1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich', metric=(1, 1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich --n 4 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(r, x, out):
    """simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(4,0,0), metric (1, 1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 7 or x.shape[1] != 16 or out.shape[1] != 16:
        raise ValueError("wrong row widths: expected r: 7, x: 16, out: 16")
    if r.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    r_t = np.empty((7, 64), dtype=r.dtype)
    x_t = np.empty((16, 64), dtype=x.dtype)
    out_t = np.empty((16, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(7):
                value = r[start + row, col]
                r_t[col, row] = value
                probe += value - value
            for col in range(16):
                value = x[start + row, col]
                x_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            r0 = r_t[0, row]
            r1 = r_t[1, row]
            r2 = r_t[2, row]
            r3 = r_t[3, row]
            r4 = r_t[4, row]
            r5 = r_t[5, row]
            r6 = r_t[6, row]
            x0 = x_t[0, row]
            x1 = x_t[1, row]
            x2 = x_t[2, row]
            x3 = x_t[3, row]
            x4 = x_t[4, row]
            x5 = x_t[5, row]
            x6 = x_t[6, row]
            x7 = x_t[7, row]
            x8 = x_t[8, row]
            x9 = x_t[9, row]
            x10 = x_t[10, row]
            x11 = x_t[11, row]
            x12 = x_t[12, row]
            x13 = x_t[13, row]
            x14 = x_t[14, row]
            x15 = x_t[15, row]
            t0 = r0*x0 - r1*x5 - r2*x6 - r3*x7 - r4*x8 - r5*x9 - r6*x10
            t1 = r0*x1 + r1*x2 + r2*x3 + r3*x4 - r4*x11 - r5*x12 - r6*x13
            t2 = r0*x2 - r1*x1 + r2*x11 + r3*x12 + r4*x3 + r5*x4 - r6*x14
            t3 = r0*x3 - r1*x11 - r2*x1 + r3*x13 - r4*x2 + r5*x14 + r6*x4
            t4 = r0*x4 - r1*x12 - r2*x13 - r3*x1 - r4*x14 - r5*x2 - r6*x3
            t5 = r0*x5 + r1*x0 - r2*x8 - r3*x9 + r4*x6 + r5*x7 - r6*x15
            t6 = r0*x6 + r1*x8 + r2*x0 - r3*x10 - r4*x5 + r5*x15 + r6*x7
            t7 = r0*x7 + r1*x9 + r2*x10 + r3*x0 - r4*x15 - r5*x5 - r6*x6
            t8 = r0*x8 - r1*x6 + r2*x5 - r3*x15 + r4*x0 - r5*x10 + r6*x9
            t9 = r0*x9 - r1*x7 + r2*x15 + r3*x5 + r4*x10 + r5*x0 - r6*x8
            t10 = r0*x10 - r1*x15 - r2*x7 + r3*x6 - r4*x9 + r5*x8 + r6*x0
            t11 = r0*x11 + r1*x3 - r2*x2 + r3*x14 + r4*x1 - r5*x13 + r6*x12
            t12 = r0*x12 + r1*x4 - r2*x14 - r3*x2 + r4*x13 + r5*x1 - r6*x11
            t13 = r0*x13 + r1*x14 + r2*x4 - r3*x3 - r4*x12 + r5*x11 + r6*x1
            t14 = r0*x14 - r1*x13 + r2*x12 - r3*x11 + r4*x4 - r5*x3 + r6*x2
            t15 = r0*x15 + r1*x10 - r2*x9 + r3*x8 + r4*x7 - r5*x6 + r6*x5
            out_t[0, row] = r0*t0 + r1*t5 + r2*t6 + r3*t7 + r4*t8 + r5*t9 + r6*t10
            out_t[1, row] = r0*t1 + r1*t2 + r2*t3 + r3*t4 + r4*t11 + r5*t12 + r6*t13
            out_t[2, row] = r0*t2 - r1*t1 - r2*t11 - r3*t12 + r4*t3 + r5*t4 + r6*t14
            out_t[3, row] = r0*t3 + r1*t11 - r2*t1 - r3*t13 - r4*t2 - r5*t14 + r6*t4
            out_t[4, row] = r0*t4 + r1*t12 + r2*t13 - r3*t1 + r4*t14 - r5*t2 - r6*t3
            out_t[5, row] = r0*t5 - r1*t0 - r2*t8 - r3*t9 + r4*t6 + r5*t7 + r6*t15
            out_t[6, row] = r0*t6 + r1*t8 - r2*t0 - r3*t10 - r4*t5 - r5*t15 + r6*t7
            out_t[7, row] = r0*t7 + r1*t9 + r2*t10 - r3*t0 + r4*t15 - r5*t5 - r6*t6
            out_t[8, row] = r0*t8 - r1*t6 + r2*t5 + r3*t15 - r4*t0 - r5*t10 + r6*t9
            out_t[9, row] = r0*t9 - r1*t7 - r2*t15 + r3*t5 + r4*t10 - r5*t0 - r6*t8
            out_t[10, row] = r0*t10 + r1*t15 - r2*t7 + r3*t6 - r4*t9 + r5*t8 - r6*t0
            out_t[11, row] = r0*t11 - r1*t3 + r2*t2 + r3*t14 - r4*t1 - r5*t13 + r6*t12
            out_t[12, row] = r0*t12 - r1*t4 - r2*t14 + r3*t2 + r4*t13 - r5*t1 - r6*t11
            out_t[13, row] = r0*t13 + r1*t14 - r2*t4 + r3*t3 - r4*t12 + r5*t11 - r6*t1
            out_t[14, row] = r0*t14 - r1*t13 + r2*t12 - r3*t11 - r4*t4 + r5*t3 - r6*t2
            out_t[15, row] = r0*t15 - r1*t10 + r2*t9 - r3*t8 - r4*t7 + r5*t6 - r6*t5
            # --- end of body ---
        for row in range(count):
            for col in range(16):
                out[start + row, col] = out_t[col, row]
    return probe == 0
