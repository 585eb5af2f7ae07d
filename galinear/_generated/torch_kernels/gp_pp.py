"""Generated kernel: geometric product out = a b in Cl(2,0,0), metric (1, 1), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1, 1))
target:     torch
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 2 --target torch --out galinear/_generated/torch_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import torch


def kernel(a, b):
    """geometric product out = a b in Cl(2,0,0), metric (1, 1), shortlex blade order; tensors with any leading shape, last axis as documented."""
    if a.shape[-1] != 4:
        raise ValueError(f"a must have 4 entries on its last axis, got {a.shape[-1]}")
    if b.shape[-1] != 4:
        raise ValueError(f"b must have 4 entries on its last axis, got {b.shape[-1]}")
    (a0, a1, a2, a3,) = torch.unbind(a, dim=-1)
    (b0, b1, b2, b3,) = torch.unbind(b, dim=-1)
    o0 = a0*b0 + a1*b1 + a2*b2 - a3*b3
    o1 = a0*b1 + a1*b0 - a2*b3 + a3*b2
    o2 = a0*b2 + a1*b3 + a2*b0 - a3*b1
    o3 = a0*b3 + a1*b2 - a2*b1 + a3*b0
    return torch.stack((o0, o1, o2, o3,), dim=-1)
