"""Generated kernel: geometric product out = a b in Cl(1,0,0), metric (1,), shortlex blade order.

spec:       KernelSpec(op='gp', metric=(1,))
target:     torch
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op gp --n 1 --target torch --out galinear/_generated/torch_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import torch


def kernel(a, b):
    """geometric product out = a b in Cl(1,0,0), metric (1,), shortlex blade order; tensors with any leading shape, last axis as documented."""
    if a.shape[-1] != 2:
        raise ValueError(f"a must have 2 entries on its last axis, got {a.shape[-1]}")
    if b.shape[-1] != 2:
        raise ValueError(f"b must have 2 entries on its last axis, got {b.shape[-1]}")
    (a0, a1,) = torch.unbind(a, dim=-1)
    (b0, b1,) = torch.unbind(b, dim=-1)
    o0 = a0*b0 + a1*b1
    o1 = a0*b1 + a1*b0
    return torch.stack((o0, o1,), dim=-1)
