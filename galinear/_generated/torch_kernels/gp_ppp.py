"""Generated kernel: geometric product out = a b in Cl(3,0,0), metric (1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1, 1, 1))
target:     torch
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 3 --target torch --out galinear/_generated/torch_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import torch


def kernel(a, b):
    """geometric product out = a b in Cl(3,0,0), metric (1, 1, 1), shortlex blade order; tensors with any leading shape, last axis as documented."""
    if a.shape[-1] != 8:
        raise ValueError(f"a must have 8 entries on its last axis, got {a.shape[-1]}")
    if b.shape[-1] != 8:
        raise ValueError(f"b must have 8 entries on its last axis, got {b.shape[-1]}")
    (a0, a1, a2, a3, a4, a5, a6, a7,) = torch.unbind(a, dim=-1)
    (b0, b1, b2, b3, b4, b5, b6, b7,) = torch.unbind(b, dim=-1)
    o0 = a0*b0 + a1*b1 + a2*b2 + a3*b3 - a4*b4 - a5*b5 - a6*b6 - a7*b7
    o1 = a0*b1 + a1*b0 - a2*b4 - a3*b5 + a4*b2 + a5*b3 - a6*b7 - a7*b6
    o2 = a0*b2 + a1*b4 + a2*b0 - a3*b6 - a4*b1 + a5*b7 + a6*b3 + a7*b5
    o3 = a0*b3 + a1*b5 + a2*b6 + a3*b0 - a4*b7 - a5*b1 - a6*b2 - a7*b4
    o4 = a0*b4 + a1*b2 - a2*b1 + a3*b7 + a4*b0 - a5*b6 + a6*b5 + a7*b3
    o5 = a0*b5 + a1*b3 - a2*b7 - a3*b1 + a4*b6 + a5*b0 - a6*b4 - a7*b2
    o6 = a0*b6 + a1*b7 + a2*b3 - a3*b2 - a4*b5 + a5*b4 + a6*b0 + a7*b1
    o7 = a0*b7 + a1*b6 - a2*b5 + a3*b4 + a4*b3 - a5*b2 + a6*b1 + a7*b0
    return torch.stack((o0, o1, o2, o3, o4, o5, o6, o7,), dim=-1)
