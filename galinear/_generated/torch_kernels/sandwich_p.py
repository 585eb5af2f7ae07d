"""Generated kernel: simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(1,0,0), metric (1,), shortlex blade order.

spec:       KernelSpec(op='sandwich', metric=(1,))
target:     torch
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich --n 1 --target torch --out galinear/_generated/torch_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import torch


def kernel(r, x):
    """simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p) in Cl(1,0,0), metric (1,), shortlex blade order; tensors with any leading shape, last axis as documented."""
    if r.shape[-1] != 1:
        raise ValueError(f"r must have 1 entries on its last axis, got {r.shape[-1]}")
    if x.shape[-1] != 2:
        raise ValueError(f"x must have 2 entries on its last axis, got {x.shape[-1]}")
    (r0,) = torch.unbind(r, dim=-1)
    (x0, x1,) = torch.unbind(x, dim=-1)
    t0 = r0*x0
    t1 = r0*x1
    o0 = r0*t0
    o1 = r0*t1
    return torch.stack((o0, o1,), dim=-1)
