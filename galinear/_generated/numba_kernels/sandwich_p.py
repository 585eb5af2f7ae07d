"""Generated kernel: simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(1,0,0), metric (1,), shortlex blade order.

spec:       KernelSpec(op='sandwich', metric=(1,))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich --n 1 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import numpy as np

from galinear._numba import jit


@jit
def kernel(r, x, out):
    """simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(1,0,0), metric (1,), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 1 or x.shape[1] != 2 or out.shape[1] != 2:
        raise ValueError("wrong row widths: expected r: 1, x: 2, out: 2")
    if r.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    nrows = out.shape[0]
    r_t = np.empty((1, 64), dtype=r.dtype)
    x_t = np.empty((2, 64), dtype=x.dtype)
    out_t = np.empty((2, 64), dtype=out.dtype)
    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan
    for start in range(0, nrows, 64):
        count = min(64, nrows - start)
        for row in range(count):
            for col in range(1):
                value = r[start + row, col]
                r_t[col, row] = value
                probe += value - value
            for col in range(2):
                value = x[start + row, col]
                x_t[col, row] = value
                probe += value - value
        for row in range(count):
            # --- straight-line body ---
            r0 = r_t[0, row]
            x0 = x_t[0, row]
            x1 = x_t[1, row]
            t0 = r0*x0
            t1 = r0*x1
            out_t[0, row] = r0*t0
            out_t[1, row] = r0*t1
            # --- end of body ---
        for row in range(count):
            for col in range(2):
                out[start + row, col] = out_t[col, row]
    return probe == 0
