"""The JAX target: ``jax.numpy`` operations, so ``jax.jit``, ``jax.grad`` and ``jax.vmap`` see through
the generated function; float32, and float64 where ``jax_enable_x64`` is on.

The kernel takes jax arrays (or numpy arrays, whose results come back as numpy arrays; float64
ones are computed in float64 within the call, whatever ``jax_enable_x64`` says) with any leading
shape. Outside a transform the status of every row is checked, as for the numpy target;
inside ``jax.jit``, ``jax.grad`` or ``jax.vmap`` it cannot be (its values are not known while the
function is traced): a zero denominator then gives inf, as ``jax.numpy`` does. The reciprocal
divides by 1 where its argument is 0, so gradients stay finite away from the refused rows.
"""
from __future__ import annotations

import contextlib

import numpy as np

from galinear.compiler.targets._arrays import ArrayRules, array_module
from galinear.compiler.targets._runtime import Loaded as _Loaded

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules", "require_jax"]

NAME = "jax"
FILE_SUFFIX = ".py"
AUTOGRAD = "jax"


class Rules(ArrayRules):
    names = {"where": "jnp.where", "sqrt": "jnp.sqrt", "cos": "jnp.cos", "sin": "jnp.sin", "abs": "jnp.abs",
             "exp": "jnp.exp", "sign": "jnp.sign"}

    @staticmethod
    def sqrt(s, arg, step):
        return [f"{s} = jnp.sqrt(jnp.maximum({arg}, 0.0))"]


def print_program(program, name: str, header: str) -> str:
    return array_module(program, header, ["import jax.numpy as jnp"], Rules, "jnp.stack({}, axis=-1)")


def require_jax():
    """``jax``, or an error naming the extra that installs it."""
    from galinear._extras import require

    return require("jax", "the jax target of galinear.compile")


def _is_jax(value) -> bool:
    return type(value).__module__.split(".")[0] in ("jax", "jaxlib")


class Loaded(_Loaded):
    TARGET = NAME

    def __init__(self, sources, name, guards, widths, out_widths, multiplications=0):
        self.jax = require_jax()  # before the module, which imports jax.numpy
        super().__init__(sources, name, guards, widths, out_widths, multiplications)

    def _dtype(self, values, given: bool):
        """float32 stays float32, the rest computes in float64: with numpy inputs in a scope where
        ``jax_enable_x64`` is on (results come back as numpy arrays), with jax inputs only where the
        caller turned it on."""
        dtype = np.result_type(*[v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype for v in values])
        if dtype not in (np.float32, np.float64):
            dtype = np.dtype(np.float64)
        if dtype == np.float64 and given and not self.jax.config.jax_enable_x64:
            raise TypeError("the jax target got float64 inputs while jax computes in float32: turn on "
                            "jax.config.update('jax_enable_x64', True) before making arrays, or pass float32")
        return dtype

    def run(self, values, names, out=None, parallel=False):
        self.refuse_out(out)
        given = any(_is_jax(v) for v in values)
        dtype = self._dtype(values, given)
        scope = contextlib.nullcontext()
        if dtype == np.float64 and not given and not self.jax.config.jax_enable_x64:
            scope = self.jax.enable_x64(True)
        with scope:
            arrays = [self.jax.numpy.asarray(v, dtype=dtype) for v in values]
            outs, status = self.module.kernel(*arrays)
            if not given:
                outs = tuple(np.asarray(o) for o in outs)
        if status is not None and not isinstance(status, self.jax.core.Tracer) and bool((status != 0).any()):
            self.raise_status(np.asarray(status))
        return outs
