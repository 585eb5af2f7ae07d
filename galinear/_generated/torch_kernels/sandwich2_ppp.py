"""Generated kernel: double simple-rotor sandwich out = R x ~S in Cl(3,0,0), metric (1, 1, 1), shortlex blade order.

spec:       KernelSpec(op='sandwich2', metric=(1, 1, 1))
target:     torch
generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)
regenerate: galinear codegen --op sandwich2 --n 3 --target torch --out galinear/_generated/torch_kernels
            (or `galinear codegen --all` / `make codegen` for every shipped kernel)

Do not edit by hand.
"""

import torch


def kernel(r, s, x):
    """double simple-rotor sandwich out = R x ~S in Cl(3,0,0), metric (1, 1, 1), shortlex blade order; tensors with any leading shape, last axis as documented."""
    if r.shape[-1] != 4:
        raise ValueError(f"r must have 4 entries on its last axis, got {r.shape[-1]}")
    if s.shape[-1] != 4:
        raise ValueError(f"s must have 4 entries on its last axis, got {s.shape[-1]}")
    if x.shape[-1] != 8:
        raise ValueError(f"x must have 8 entries on its last axis, got {x.shape[-1]}")
    (r0, r1, r2, r3,) = torch.unbind(r, dim=-1)
    (s0, s1, s2, s3,) = torch.unbind(s, dim=-1)
    (x0, x1, x2, x3, x4, x5, x6, x7,) = torch.unbind(x, dim=-1)
    t0 = r0*x0 - r1*x4 - r2*x5 - r3*x6
    t1 = r0*x1 + r1*x2 + r2*x3 - r3*x7
    t2 = r0*x2 - r1*x1 + r2*x7 + r3*x3
    t3 = r0*x3 - r1*x7 - r2*x1 - r3*x2
    t4 = r0*x4 + r1*x0 - r2*x6 + r3*x5
    t5 = r0*x5 + r1*x6 + r2*x0 - r3*x4
    t6 = r0*x6 - r1*x5 + r2*x4 + r3*x0
    t7 = r0*x7 + r1*x3 - r2*x2 + r3*x1
    o0 = s0*t0 + s1*t4 + s2*t5 + s3*t6
    o1 = s0*t1 + s1*t2 + s2*t3 + s3*t7
    o2 = s0*t2 - s1*t1 - s2*t7 + s3*t3
    o3 = s0*t3 + s1*t7 - s2*t1 - s3*t2
    o4 = s0*t4 - s1*t0 - s2*t6 + s3*t5
    o5 = s0*t5 + s1*t6 - s2*t0 - s3*t4
    o6 = s0*t6 - s1*t5 + s2*t4 - s3*t0
    o7 = s0*t7 - s1*t3 + s2*t2 - s3*t1
    return torch.stack((o0, o1, o2, o3, o4, o5, o6, o7,), dim=-1)
