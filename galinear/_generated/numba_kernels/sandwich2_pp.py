"""Generated kernel: double simple-rotor sandwich out = R x ~S in Cl(2,0,0), metric (1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich2', metric=(1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich2 --n 2 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

from galinear._numba import jit


@jit
def kernel(r, s, x, out):
    """double simple-rotor sandwich out = R x ~S in Cl(2,0,0), metric (1, 1), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 2 or s.shape[1] != 2 or x.shape[1] != 4 or out.shape[1] != 4:
        raise ValueError("wrong row widths: expected r: 2, s: 2, x: 4, out: 4")
    if r.shape[0] != out.shape[0] or s.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    for i in range(r.shape[0]):
        r0 = r[i, 0]
        r1 = r[i, 1]
        s0 = s[i, 0]
        s1 = s[i, 1]
        x0 = x[i, 0]
        x1 = x[i, 1]
        x2 = x[i, 2]
        x3 = x[i, 3]
        t0 = r0*x0 - r1*x3
        t1 = r0*x1 + r1*x2
        t2 = r0*x2 - r1*x1
        t3 = r0*x3 + r1*x0
        out[i, 0] = s0*t0 + s1*t3
        out[i, 1] = s0*t1 + s1*t2
        out[i, 2] = s0*t2 - s1*t1
        out[i, 3] = s0*t3 - s1*t0
