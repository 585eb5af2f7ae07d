"""Generated kernel: geometric product out = a b in Cl(3,0,0), metric (1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1, 1, 1))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 3 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

from galinear._numba import jit


@jit
def kernel(a, b, out):
    """geometric product out = a b in Cl(3,0,0), metric (1, 1, 1), shortlex blade order; see galinear._generated for the signature."""
    if a.shape[1] != 8 or b.shape[1] != 8 or out.shape[1] != 8:
        raise ValueError("wrong row widths: expected a: 8, b: 8, out: 8")
    if a.shape[0] != out.shape[0] or b.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    for i in range(a.shape[0]):
        a0 = a[i, 0]
        a1 = a[i, 1]
        a2 = a[i, 2]
        a3 = a[i, 3]
        a4 = a[i, 4]
        a5 = a[i, 5]
        a6 = a[i, 6]
        a7 = a[i, 7]
        b0 = b[i, 0]
        b1 = b[i, 1]
        b2 = b[i, 2]
        b3 = b[i, 3]
        b4 = b[i, 4]
        b5 = b[i, 5]
        b6 = b[i, 6]
        b7 = b[i, 7]
        out[i, 0] = a0*b0 + a1*b1 + a2*b2 + a3*b3 - a4*b4 - a5*b5 - a6*b6 - a7*b7
        out[i, 1] = a0*b1 + a1*b0 - a2*b4 - a3*b5 + a4*b2 + a5*b3 - a6*b7 - a7*b6
        out[i, 2] = a0*b2 + a1*b4 + a2*b0 - a3*b6 - a4*b1 + a5*b7 + a6*b3 + a7*b5
        out[i, 3] = a0*b3 + a1*b5 + a2*b6 + a3*b0 - a4*b7 - a5*b1 - a6*b2 - a7*b4
        out[i, 4] = a0*b4 + a1*b2 - a2*b1 + a3*b7 + a4*b0 - a5*b6 + a6*b5 + a7*b3
        out[i, 5] = a0*b5 + a1*b3 - a2*b7 - a3*b1 + a4*b6 + a5*b0 - a6*b4 - a7*b2
        out[i, 6] = a0*b6 + a1*b7 + a2*b3 - a3*b2 - a4*b5 + a5*b4 + a6*b0 + a7*b1
        out[i, 7] = a0*b7 + a1*b6 - a2*b5 + a3*b4 + a4*b3 - a5*b2 + a6*b1 + a7*b0
