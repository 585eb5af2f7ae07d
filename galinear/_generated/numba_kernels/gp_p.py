"""Generated kernel: geometric product out = a b in Cl(1,0,0), metric (1,), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1,))
target:     numba
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 1 --target numba --out galinear/_generated/numba_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

from galinear._numba import jit


@jit
def kernel(a, b, out):
    """geometric product out = a b in Cl(1,0,0), metric (1,), shortlex blade order; see galinear._generated for the signature."""
    if a.shape[1] != 2 or b.shape[1] != 2 or out.shape[1] != 2:
        raise ValueError("wrong row widths: expected a: 2, b: 2, out: 2")
    if a.shape[0] != out.shape[0] or b.shape[0] != out.shape[0]:
        raise ValueError("all arguments need the same batch size (axis 0)")
    for i in range(a.shape[0]):
        a0 = a[i, 0]
        a1 = a[i, 1]
        b0 = b[i, 0]
        b1 = b[i, 1]
        out[i, 0] = a0*b0 + a1*b1
        out[i, 1] = a0*b1 + a1*b0
