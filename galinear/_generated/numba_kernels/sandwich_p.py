"""Generated kernel: simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(1,0,0), metric (1,), shortlex blade order.

spec:       KernelSpec(op='sandwich', metric=(1,))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich --n 1 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

from galinear._numba import jit


@jit
def kernel(r, x, out):
    """simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(1,0,0), metric (1,), shortlex blade order; see galinear._generated for the signature."""
    if r.shape[1] != 1 or x.shape[1] != 2 or out.shape[1] != 2:
        raise ValueError("wrong row widths: expected r: 1, x: 2, out: 2")
    if r.shape[0] != out.shape[0] or x.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    for i in range(r.shape[0]):
        r0 = r[i, 0]
        x0 = x[i, 0]
        x1 = x[i, 1]
        t0 = r0*x0
        t1 = r0*x1
        out[i, 0] = r0*t0
        out[i, 1] = r0*t1
