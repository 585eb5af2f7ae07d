"""One ``torch.autograd.Function`` around a numba or C kernel and its generated backward."""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["make_function"]


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def make_function(kernel):
    """``f(*tensors) -> tensor``: forward by ``kernel``, backward by ``kernel.backward``."""
    backward_kernel = kernel.backward
    names = list(kernel.input_blades)

    class GeneratedFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            ctx.save_for_backward(*tensors)
            out = kernel(*[_numpy(t) for t in tensors])
            return torch.from_numpy(np.ascontiguousarray(out)).to(tensors[0].device)

        @staticmethod
        def backward(ctx, grad):
            tensors = ctx.saved_tensors
            grads = backward_kernel(*[_numpy(t) for t in tensors], _numpy(grad.contiguous()))
            out = []
            for t, g, need in zip(tensors, grads, ctx.needs_input_grad):
                if not need:
                    out.append(None)
                    continue
                g = torch.from_numpy(np.ascontiguousarray(g)).to(device=t.device, dtype=t.dtype)
                out.append(g.sum_to_size(t.shape))
            return tuple(out)

    def function(*tensors, **named):
        if named:
            values = dict(zip(names, tensors))
            values.update(named)
            tensors = tuple(values[k] for k in names)
        if len(tensors) != len(names):
            raise TypeError(f"{kernel.name} takes {len(names)} tensors ({', '.join(names)})")
        dtype = tensors[0].dtype
        for t in tensors:
            dtype = torch.promote_types(dtype, t.dtype)
        tensors = tuple(t.to(dtype) for t in tensors)
        return GeneratedFunction.apply(*tensors)

    function.__name__ = f"{kernel.name}_torch"
    function.__doc__ = f"{kernel.name} on tensors, differentiable through its generated backward kernel."
    return function
