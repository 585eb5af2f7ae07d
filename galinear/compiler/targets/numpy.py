"""The numpy target: one vectorised function ``kernel(*inputs)`` on arrays ``(..., k_i)``.

It returns ``(outputs, status)``; a division by 0 gives inf (numpy's errors silenced), a square
root of a negative number 0, and the status names the guard that failed on each row.
"""
from __future__ import annotations

import numpy as np

from galinear.compiler.targets._arrays import ArrayRules, array_module
from galinear.compiler.targets._runtime import ArrayLoaded

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules"]

NAME = "numpy"
FILE_SUFFIX = ".py"
AUTOGRAD = None


class Rules(ArrayRules):
    names = {"where": "np.where", "sqrt": "np.sqrt", "cos": "np.cos", "sin": "np.sin", "abs": "np.abs",
             "exp": "np.exp", "sign": "np.sign"}

    @staticmethod
    def recip(s, arg, step):
        return ["with np.errstate(divide='ignore', invalid='ignore'):", f"    {s} = 1.0 / {arg}"]

    @staticmethod
    def sqrt(s, arg, step):
        return [f"{s} = np.sqrt(np.maximum({arg}, 0.0))"]


def print_program(program, name: str, header: str) -> str:
    return array_module(program, header, ["import numpy as np"], Rules, "np.stack({}, axis=-1)")


class Loaded(ArrayLoaded):
    TARGET = NAME

    def run_arrays(self, arrays, names, out, parallel):
        self.refuse_out(out)
        dtype = np.result_type(*arrays)
        if dtype not in (np.float32, np.float64):
            dtype = np.dtype(np.float64)
        arrays = [a.astype(dtype, copy=False) for a in arrays]
        self.check_finite(names, [a.reshape(-1, a.shape[-1]) for a in arrays])
        with np.errstate(all="ignore"):
            outs, status = self.module.kernel(*arrays)
        if status is not None:
            self.raise_status(status)
        return outs
