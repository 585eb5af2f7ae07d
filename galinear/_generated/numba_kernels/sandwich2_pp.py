"""Generated kernel: double simple-rotor sandwich out = R x ~S in Cl(2,0,0), metric (1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich2', metric=(1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich2 --n 2 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(r, s, x, out):
    """double simple-rotor sandwich out = R x ~S in Cl(2,0,0), metric (1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 2 or s.shape[1] != 2 or x.shape[1] != 4 or out.shape[1] != 4:
        raise ValueError("wrong row widths: expected r: 2, s: 2, x: 4, out: 4")
    if r.shape[0] != out.shape[0] or s.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    r_t = np.empty((2, 64), dtype=r.dtype)
    s_t = np.empty((2, 64), dtype=s.dtype)
    x_t = np.empty((4, 64), dtype=x.dtype)
    out_t = np.empty((4, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(2):
                value = r[start + row, col]
                r_t[col, row] = value
                probe += value - value
            for col in range(2):
                value = s[start + row, col]
                s_t[col, row] = value
                probe += value - value
            for col in range(4):
                value = x[start + row, col]
                x_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            r0 = r_t[0, row]
            r1 = r_t[1, row]
            s0 = s_t[0, row]
            s1 = s_t[1, row]
            x0 = x_t[0, row]
            x1 = x_t[1, row]
            x2 = x_t[2, row]
            x3 = x_t[3, row]
            t0 = r0*x0 - r1*x3
            t1 = r0*x1 + r1*x2
            t2 = r0*x2 - r1*x1
            t3 = r0*x3 + r1*x0
            out_t[0, row] = s0*t0 + s1*t3
            out_t[1, row] = s0*t1 + s1*t2
            out_t[2, row] = s0*t2 - s1*t1
            out_t[3, row] = s0*t3 - s1*t0
            # --- end of body ---
        for row in range(count):
            for col in range(4):
                out[start + row, col] = out_t[col, row]
    return probe == 0
