"""Generated kernel: double simple-rotor sandwich out = R x ~S in Cl(2,0,0), metric (1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich2', metric=(1, 1))
target:     torch
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich2 --n 2 --target torch --out galinear/_generated/torch_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import torch


def kernel(r, s, x):
    """double simple-rotor sandwich out = R x ~S in Cl(2,0,0), metric (1, 1), shortlex blade order; tensors with any leading shape, last axis as documented."""
    if r.shape[-1] != 2:
        raise ValueError(f"r must have 2 entries on its last axis, got {r.shape[-1]}")
    if s.shape[-1] != 2:
        raise ValueError(f"s must have 2 entries on its last axis, got {s.shape[-1]}")
    if x.shape[-1] != 4:
        raise ValueError(f"x must have 4 entries on its last axis, got {x.shape[-1]}")
    (r0, r1,) = torch.unbind(r, dim=-1)
    (s0, s1,) = torch.unbind(s, dim=-1)
    (x0, x1, x2, x3,) = torch.unbind(x, dim=-1)
    t0 = r0*x0 - r1*x3
    t1 = r0*x1 + r1*x2
    t2 = r0*x2 - r1*x1
    t3 = r0*x3 + r1*x0
    o0 = s0*t0 + s1*t3
    o1 = s0*t1 + s1*t2
    o2 = s0*t2 - s1*t1
    o3 = s0*t3 - s1*t0
    return torch.stack((o0, o1, o2, o3,), dim=-1)
