"""The torch target: plain torch operations, so autograd, ``torch.func`` and ``torch.compile`` see
through it; CPU and CUDA tensors (numpy arrays are converted, and the results converted back).

Under ``torch.compile`` and ``torch.func`` transforms the status is not checked (a data-dependent
branch would break the graph), and a zero denominator gives inf as torch does.
"""
from __future__ import annotations

import numpy as np

from galinear.compiler.targets._arrays import ArrayRules, array_module
from galinear.compiler.targets._runtime import Loaded as _Loaded
from galinear.compiler.targets._runtime import is_tensor

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules", "as_tensors", "tracing"]

NAME = "torch"
FILE_SUFFIX = ".py"
AUTOGRAD = "torch"


class Rules(ArrayRules):
    names = {"where": "torch.where", "sqrt": "torch.sqrt", "cos": "torch.cos", "sin": "torch.sin",
             "abs": "torch.abs", "exp": "torch.exp", "sign": "torch.sign"}

    @staticmethod
    def sqrt(s, arg, step):
        return [f"{s} = torch.sqrt(torch.clamp({arg}, min=0.0))"]


def print_program(program, name: str, header: str) -> str:
    return array_module(program, header, ["import torch"], Rules, "torch.stack({}, dim=-1)")


def as_tensors(values):
    """``(tensors, given_tensors)``: every value a tensor of one floating dtype (float64 for ints)."""
    import torch

    given = any(is_tensor(v) for v in values)
    values = [v if is_tensor(v) else torch.as_tensor(np.asarray(v)) for v in values]
    dtype = values[0].dtype
    for v in values[1:]:
        dtype = torch.promote_types(dtype, v.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float64
    return [v.to(dtype) for v in values], given


def tracing(t) -> bool:
    """Whether ``t`` is seen by ``torch.compile`` or a ``torch.func`` transform (no Python branch on it)."""
    import torch

    try:
        if torch.compiler.is_compiling():
            return True
    except AttributeError:  # pragma: no cover - older torch
        pass
    try:
        from torch._C._functorch import is_functorch_wrapped_tensor

        return bool(is_functorch_wrapped_tensor(t))
    except ImportError:  # pragma: no cover
        return False


class Loaded(_Loaded):
    TARGET = NAME

    def run(self, values, names, out=None, parallel=False):
        self.refuse_out(out)
        tensors, given = as_tensors(values)
        outs, status = self.module.kernel(*tensors)
        if status is not None and not tracing(status) and bool((status != 0).any()):
            self.raise_status(status.detach().cpu().numpy())
        return outs if given else tuple(o.detach().cpu().numpy() for o in outs)
