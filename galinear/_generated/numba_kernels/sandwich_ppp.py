"""Generated kernel: simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(3,0,0), metric (1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich', metric=(1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich --n 3 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

from galinear._numba import jit


@jit
def kernel(r, x, out):
    """simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(3,0,0), metric (1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 4 or x.shape[1] != 8 or out.shape[1] != 8:
        raise ValueError("wrong row widths: expected r: 4, x: 8, out: 8")
    if r.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    for i in range(r.shape[0]):
        r0 = r[i, 0]
        r1 = r[i, 1]
        r2 = r[i, 2]
        r3 = r[i, 3]
        x0 = x[i, 0]
        x1 = x[i, 1]
        x2 = x[i, 2]
        x3 = x[i, 3]
        x4 = x[i, 4]
        x5 = x[i, 5]
        x6 = x[i, 6]
        x7 = x[i, 7]
        t0 = r0*x0 - r1*x4 - r2*x5 - r3*x6
        t1 = r0*x1 + r1*x2 + r2*x3 - r3*x7
        t2 = r0*x2 - r1*x1 + r2*x7 + r3*x3
        t3 = r0*x3 - r1*x7 - r2*x1 - r3*x2
        t4 = r0*x4 + r1*x0 - r2*x6 + r3*x5
        t5 = r0*x5 + r1*x6 + r2*x0 - r3*x4
        t6 = r0*x6 - r1*x5 + r2*x4 + r3*x0
        t7 = r0*x7 + r1*x3 - r2*x2 + r3*x1
        out[i, 0] = r0*t0 + r1*t4 + r2*t5 + r3*t6
        out[i, 1] = r0*t1 + r1*t2 + r2*t3 + r3*t7
        out[i, 2] = r0*t2 - r1*t1 - r2*t7 + r3*t3
        out[i, 3] = r0*t3 + r1*t7 - r2*t1 - r3*t2
        out[i, 4] = r0*t4 - r1*t0 - r2*t6 + r3*t5
        out[i, 5] = r0*t5 + r1*t6 - r2*t0 - r3*t4
        out[i, 6] = r0*t6 - r1*t5 + r2*t4 - r3*t0
        out[i, 7] = r0*t7 - r1*t3 + r2*t2 - r3*t1
