r"""What a :class:`~galinear.nn.RotorNetwork` stage does after its gadgets, fused: one autograd
Function for the chunk sum, the permutations, LayerNorm without affine, PReLU and the
alpha-weighted branch sum of all branches of a stage at once.

A stage of B branches (B = 1 for the input stage) maps the gadgets' chunk-pair outputs
y (S, T, B, Kp) (T tokens; K = S Kp coordinates per branch, in the S parts of Kp that the batched
products computing them produce) to

.. math::

    z_b &= \mathrm{place}\big(s_{b} \odot y_{b}\big) \in \mathbb{R}^H, \qquad
    u_b = \mathrm{PReLU}(\mathrm{LN}(z_b[\pi_b])), \qquad h = \textstyle\sum_b a_b u_b

(s: each coordinate's factor, alpha times the output averaging; place: coordinate k added to
hidden coordinate dest[k], which sums the input chunks and the overlapping output chunks;
:math:`\pi_b` the branch's fixed permutation; a the branch weights, none for the input stage).
The backward pass keeps only y (the tensor the exact rotor maps keep anyway, so nothing new); z,
the permuted and normalised values, LayerNorm's statistics and the PReLU output are recomputed.
The same code serves every sandwich backend: on the CPU in float32/float64 two numba kernels
(:mod:`galinear.rotor_kernels.branches`, one pass over each token with its vectors in the L1 cache),
elsewhere plain torch operations.
"""
from __future__ import annotations

import torch

from galinear.nn.functional.plan import numba_kernels_usable
from galinear.nn.functional.threads import intra_op_threads

__all__ = ["branch_sum"]


def _parts_scale(scale, S):
    """(S, 1, B, Kp) view of the factors (B, S Kp), to multiply y (S, T, B, Kp)."""
    B = scale.shape[0]
    return scale.view(B, S, -1).permute(1, 0, 2).unsqueeze(1)


def _place(y, scale, dest, H):
    """z (T, B, H) from y (S, T, B, Kp) (scale None: y is (1, T, B, H) already)."""
    S, T, B, Kp = y.shape
    if scale is None:
        return y[0]
    flat = (y * _parts_scale(scale, S)).permute(1, 2, 0, 3).reshape(T, B, S * Kp)
    return flat.new_zeros(T, B, H).index_add_(2, dest, flat)


def _normalised(z, permutation, eps):
    """(LN(z[pi]), mean, rstd): the permuted rows normalised without affine parameters."""
    T, B, H = z.shape
    permuted = z.gather(2, permutation.unsqueeze(0).expand(T, B, H))
    return torch.native_layer_norm(permuted, (H,), None, None, eps)


def _weighted(parts, weights):
    """sum_b weights[b] parts[:, b] for parts (T, B, H) (None: the single branch)."""
    if weights is None:
        return parts[:, 0]
    out = parts[:, 0] * weights[0]
    for b in range(1, parts.shape[1]):
        out = torch.addcmul(out, parts[:, b], weights[b])
    return out


def _kernel_usable(y) -> bool:
    """The numba kernels of :mod:`galinear.rotor_kernels.branches` serve float32/float64 CPU tensors
    when numba compiles (the dispatcher's rule)."""
    return numba_kernels_usable(y, "branches")


def _slots(y, scale, dest, permutation, H):
    """(scale (B, K), slot (B, K)) for the kernels: slot[b, k] is where coordinate k of branch b
    lands in the permuted vector of branch b."""
    inverse = permutation.argsort(-1)
    if scale is None:
        return y.new_ones(y.shape[2], H), inverse
    return scale, inverse[:, dest]


def _weights_or_ones(weights, y):
    return y.new_ones(y.shape[2]) if weights is None else weights


class _BranchSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, scale, weights, slope, dest, permutation, H, eps):
        ctx.H, ctx.eps = H, eps
        ctx.save_for_backward(y, scale, weights, slope, dest, permutation)
        ctx.kernel = _kernel_usable(y)
        if ctx.kernel:
            from galinear.rotor_kernels import branches as kernels

            factors, slot = (_array(t) for t in _slots(y, scale, dest, permutation, H))
            plan = kernels.gather_plan(slot, factors, H, y.shape)
            ctx.layout = factors, slot, plan  # the backward pass's too (scale is saved: an in-place edit raises)
            with intra_op_threads(torch.get_num_threads()):
                out = kernels.stage_forward(_array(y), factors, slot, _array(_weights_or_ones(weights, y)),
                                            float(slope), eps, H, plan)
            return torch.from_numpy(out)
        z = _place(y, scale, dest, H)
        normed = _normalised(z, permutation, eps)[0]
        del z
        return _weighted(torch.prelu(normed, slope), weights)

    @staticmethod
    def backward(ctx, grad):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "a RotorNetwork under autograd is differentiable once: its stage function has no graph of its "
                "backward pass (create_graph=True), so second derivatives would be wrong; for higher derivatives "
                "call the network under torch.func (torch.func.grad, jacrev, hessian), which runs it gadget by "
                "gadget in plain torch operations")
        y, scale, weights, slope, dest, permutation = ctx.saved_tensors
        if ctx.kernel:
            return _BranchSum._kernel_backward(ctx, grad, y, scale, weights, slope)
        # recomputed: the placed chunks and their normalised permutation (as in the forward pass)
        normed, _, rstd = _normalised(_place(y, scale, dest, ctx.H), permutation, ctx.eps)
        T, B, H = normed.shape
        upstream = grad.unsqueeze(1)
        grad_weights = grad_slope = None
        if ctx.needs_input_grad[2]:
            grad_weights = (torch.prelu(normed, slope) * upstream).sum((0, 2))
        grad_act = upstream if weights is None else upstream * weights.view(1, B, 1)
        if ctx.needs_input_grad[3]:
            grad_slope = (grad_act * normed.clamp(max=0)).sum().reshape(slope.shape)
        # PReLU's derivative, slope where normed <= 0 and 1 above (as torch's PReLU), in float
        # operations only (comparisons and selections are several times slower on the CPU)
        derivative = normed.clamp(0, 1).ceil_().neg_().add_(1).mul_(slope - 1).add_(1)
        grad_norm = derivative.mul_(grad_act)
        del grad_act
        # LayerNorm without affine: rstd (g - mean(g) - x mean(g x)), x the normalised values
        correlation = (grad_norm * normed).mean(-1, keepdim=True)
        grad_norm -= grad_norm.mean(-1, keepdim=True)
        grad_norm -= normed.mul_(correlation)
        grad_norm *= rstd
        del normed
        inverse = permutation.argsort(-1)
        grad_z = grad_norm.gather(2, inverse.unsqueeze(0).expand(T, B, H))
        del grad_norm
        grad_y = grad_scale = None
        if scale is None:
            grad_y = grad_z.unsqueeze(0)
        else:
            S, Kp = y.shape[0], y.shape[3]
            pairs = grad_z.index_select(2, dest).view(T, B, S, Kp).permute(2, 0, 1, 3)  # (S, T, B, Kp)
            if ctx.needs_input_grad[0]:
                grad_y = pairs * _parts_scale(scale, S)
            if ctx.needs_input_grad[1]:
                grad_scale = (y * pairs).sum(1).permute(1, 0, 2).reshape(scale.shape)
        return grad_y, grad_scale, grad_weights, grad_slope, None, None, None, None

    @staticmethod
    def _kernel_backward(ctx, grad, y, scale, weights, slope):
        from galinear.rotor_kernels import branches as kernels

        factors, slot, plan = ctx.layout
        with intra_op_threads(torch.get_num_threads()):
            grad_y, grad_scale, grad_weights, grad_slope = kernels.stage_backward(
                _array(y), factors, slot, _array(_weights_or_ones(weights, y)),
                float(slope), ctx.eps, _array(grad.to(y.dtype)), plan)
        dtype = y.dtype
        return (torch.from_numpy(grad_y) if ctx.needs_input_grad[0] else None,
                torch.from_numpy(grad_scale).to(dtype).view(scale.shape) if ctx.needs_input_grad[1] else None,
                torch.from_numpy(grad_weights).to(dtype) if ctx.needs_input_grad[2] else None,
                torch.tensor([grad_slope], dtype=dtype).reshape(slope.shape) if ctx.needs_input_grad[3] else None,
                None, None, None, None)


def _array(t):
    """A C-contiguous numpy view (or copy) of a CPU tensor without autograd history."""
    return t.detach().contiguous().numpy()


def branch_sum(y, scale, weights, slope, dest, permutation, H: int, eps: float) -> torch.Tensor:
    r"""h (T, H) of one network stage (module docstring), differentiable in y, scale, weights
    and slope.

    Parameters
    ----------
    y : (S, T, B, Kp) chunk-pair outputs of the stage's B gadgets, coordinate k = s Kp + q of
        branch b at y[s, t, b, q]; with ``scale=None``, (1, T, B, H): the gadgets' outputs themselves.
    scale : (B, S Kp) factor of each coordinate (alpha times the output averaging), or None.
    weights : (B,) branch weights, or None for a stage of one branch without them (the input stage).
    slope : the PReLU's (1,) weight.
    dest : (S Kp,) long, the hidden coordinate each coordinate is added to (None with ``scale=None``).
    permutation : (B, H) each branch's fixed permutation.
    eps : LayerNorm's epsilon.
    """
    if y.dim() != 4:
        raise ValueError(f"y must be (S, T, B, Kp), got shape {tuple(y.shape)}")
    if weights is None and y.shape[2] != 1:
        raise ValueError(f"a stage of {y.shape[2]} branches needs branch weights")
    if (scale is None) != (dest is None):
        raise ValueError("give scale and dest together (both None when y holds the gadgets' outputs)")
    return _BranchSum.apply(y, scale, weights, slope, dest, permutation, H, eps)
