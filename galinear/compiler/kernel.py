"""The :class:`Kernel`: a generated program loaded for its target, called on coefficient arrays.

Arrays hold the coefficients of the blades in ``input_blades[name]`` on their last axis, in that
order; leading axes broadcast (numpy rules) and the result has shape ``(..., len(output_blades))``.
"""
from __future__ import annotations

import numpy as np

from galinear.compiler.build import Built, grad_input_name, metric_of
from galinear.compiler.targets import target as target_module
from galinear.compiler.targets._runtime import is_tensor
from galinear.compiler.targets.numba import PARALLEL_MULTIPLICATIONS, PARALLEL_ROWS
from galinear.symbolic.emit import Sources

__all__ = ["Kernel", "KernelPair", "PARALLEL_ROWS", "PARALLEL_MULTIPLICATIONS"]


class Kernel:
    """A compiled function of multivectors (see :func:`galinear.compile`).

    Attributes: ``input_blades`` (name -> blade names, in array order), ``output_blades``,
    ``source`` (``header`` too for C), ``operations`` (multiplications, additions, divisions,
    functions of the generated program), ``strategy`` (``"staged"`` or ``"expanded"``),
    ``target``, ``backward`` (the generated backward :class:`Kernel`, or None).
    """

    def __init__(self, built: Built, func, algebra, inputs: dict, *, backward: bool = False):
        self._built = built
        self.func = func
        self.algebra = algebra
        self.inputs = dict(inputs)
        self.target = built.target
        self.is_backward = backward
        if backward:
            self.input_blades = {**built.input_blades, grad_input_name(built.input_blades): built.output_blades}
            self.output_blades = tuple(f"grad_{k}" for k in built.input_blades)
            self.source, self.header = built.backward_source, built.backward_header
            self.operations = dict(built.backward_operations)
            guards = built.backward_guards
            out_widths = tuple(len(v) for v in built.input_blades.values())
            name = f"{built.name}_backward"
        else:
            self.input_blades = dict(built.input_blades)
            self.output_blades = tuple(built.output_blades)
            self.source, self.header = built.source, built.header
            self.operations = dict(built.operations)
            guards = built.guards
            out_widths = (len(built.output_blades),)
            name = built.name
        self.strategy = built.strategy
        self.name = name
        widths = tuple(len(v) for v in self.input_blades.values())
        self._target = target_module(self.target)
        self._program = self._target.Loaded(Sources(self.source, self.header), name, guards, widths, out_widths,
                                            self.operations.get("multiplications", 0))
        many = len(out_widths) > 1 or backward  # a backward: one gradient per input
        self._fast = self._program.fast_call(not many)
        self.backward = None
        if not backward and built.backward_source is not None:
            self.backward = Kernel(built, func, algebra, inputs, backward=True)

    def __repr__(self):
        ins = ", ".join(f"{k}[{len(v)}]" for k, v in self.input_blades.items())
        return (f"Kernel({self.name}: {ins} -> [{len(self.output_blades)}], target={self.target!r}, "
                f"{self.operations.get('multiplications')} multiplications)")

    # ---------------------------------------------------------------- calling
    def _arguments(self, args, kwargs):
        names = list(self.input_blades)
        if len(args) > len(names):
            raise TypeError(f"{self.name} takes {len(names)} arrays ({', '.join(names)}), got {len(args)}")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in self.input_blades:
                raise TypeError(f"{self.name} has no input {k!r}; inputs: {', '.join(names)}")
            if k in values:
                raise TypeError(f"{self.name} got input {k!r} twice")
            values[k] = v
        missing = [k for k in names if k not in values]
        if missing:
            raise TypeError(f"{self.name} is missing inputs {missing}")
        out = []
        for k in names:
            v = values[k]
            width = len(self.input_blades[k])
            shape = tuple(v.shape) if hasattr(v, "shape") else np.shape(v)
            if not shape or shape[-1] != width:
                raise ValueError(f"input {k!r} needs {width} coefficients on its last axis "
                                 f"({', '.join(self.input_blades[k])}); got shape {shape}")
            out.append(v)
        return names, out

    def _algebra(self):
        """The numeric :class:`galinear.Algebra` of the kernel (made from a signature if needed)."""
        from galinear.core import Algebra
        from galinear.core.layout import Layout

        if isinstance(self.algebra, Layout):
            return self.algebra
        metric = metric_of(self.algebra)
        return Algebra(metric.count(1), metric.count(-1), metric.count(0))

    def _unpack(self, name: str, value):
        """The coefficients of ``input_blades[name]`` from a :class:`galinear.MultiVector`
        (refused when it holds a blade outside the input's pattern: it would be dropped)."""
        from galinear.blades import blade_index

        algebra = value.algebra
        metric = tuple(self._algebra().metric)
        if tuple(algebra.metric) != metric:
            raise ValueError(f"input {name!r} is a multivector of metric {tuple(algebra.metric)}; the kernel was "
                             f"compiled for metric {metric}")
        index = [blade_index(algebra.n, b) for b in self.input_blades[name]]
        values = np.asarray(value.values)
        rest = np.ones(values.shape[-1], bool)
        rest[index] = False
        if np.any(values[..., rest] != 0):
            present = np.any(values.reshape(-1, values.shape[-1]) != 0, axis=0)
            names = [algebra.blade_names[i] for i in np.flatnonzero(rest & present)]
            raise ValueError(f"input {name!r} holds blades {', '.join(names)} outside its compiled pattern "
                             f"({', '.join(self.input_blades[name])}); compile with a pattern that includes them")
        return values[..., index]

    def _pack(self, result):
        """A :class:`galinear.MultiVector` holding the output coefficients in their blades."""
        from galinear.blades import blade_index
        from galinear.core import MultiVector

        algebra = self._algebra()
        array = result.detach().cpu().numpy() if is_tensor(result) else np.asarray(result)
        full = np.zeros(array.shape[:-1] + (algebra.dim,), array.dtype)
        full[..., [blade_index(algebra.n, b) for b in self.output_blades]] = array
        return MultiVector(algebra, full)

    def __call__(self, *args, **kwargs):
        """The kernel on coefficient arrays, by position (the function's parameter order) or by
        name; ``out=`` (numba and c) writes into the given array(s) of the result's shape and
        dtype instead of fresh ones; ``parallel`` (numba) runs the ``prange`` variant over rows
        (True, or "auto" for large batches of long programs).

        An input named ``out`` or ``parallel`` takes that keyword; the option is then given
        through :meth:`run`. Inputs may be :class:`galinear.MultiVector`s (their blades of the
        input's pattern are read); a forward kernel given one returns a
        :class:`galinear.MultiVector` too."""
        if self._fast is not None and (not kwargs or (len(kwargs) == 1 and "out" in kwargs
                                                      and "out" not in self.input_blades)):
            result = self._fast(args, kwargs.get("out"))
            if result is not None:
                return result
        options = {k: kwargs.pop(k) for k in ("out", "parallel") if k in kwargs and k not in self.input_blades}
        return self.run(args, kwargs, **options)

    @property
    def unchecked(self):
        """The numba target's kernel without the call's checks: ``f(*inputs, *outputs)`` on 2-D
        C-contiguous arrays ``(N, k)`` of one float dtype, the outputs preallocated; callable from
        your own ``@numba.njit`` code. It checks nothing (shapes, dtypes, finite values: wrong ones
        give wrong numbers or a crash); a failed guard (a division by 0, a square root of a negative
        number) raises ValueError. Use the kernel itself unless a profile shows its checks."""
        module = self._program.module
        if self.target != "numba" or not hasattr(module, "kernel_unchecked"):
            raise AttributeError(f"unchecked is offered by the numba target; this kernel's target is "
                                 f"{self.target!r}")
        return module.kernel_unchecked

    def run(self, args=(), kwargs=None, *, out=None, parallel=False):
        """The kernel on the inputs ``args`` (by position) and ``kwargs`` (a dict, by name); the
        options as in ``__call__``, whatever the inputs are called."""
        from galinear.core import MultiVector

        if isinstance(args, dict):
            args, kwargs = (), {**args, **(kwargs or {})}
        args, kwargs = tuple(args), dict(kwargs or {})

        multivectors = any(isinstance(v, MultiVector) for v in (*args, *kwargs.values()))
        if multivectors:
            names = list(self.input_blades)
            args = tuple(self._unpack(n, v) if isinstance(v, MultiVector) else v for n, v in zip(names, args))
            kwargs = {k: self._unpack(k, v) if isinstance(v, MultiVector) and k in self.input_blades else v
                      for k, v in kwargs.items()}
            if out is not None:
                raise ValueError("out= takes arrays; with multivector inputs the kernel returns a new MultiVector")
        result = self._call_arrays(args, out, parallel, kwargs)
        if multivectors and not self.is_backward and len(self._program.out_widths) == 1:
            return self._pack(result)
        return result

    def _call_arrays(self, args, out, parallel, kwargs):
        names, values = self._arguments(args, kwargs)
        many = len(self._program.out_widths) > 1 or self.is_backward  # a backward: one gradient per input
        outs = self._program.run(values, names, out, parallel)
        return outs if many else outs[0]

    # ---------------------------------------------------------------- torch
    def torch_function(self):
        """A differentiable function on tensors.

        For numba and C: one ``torch.autograd.Function`` whose forward is this kernel and whose
        backward is the generated backward kernel (``compile(..., grad=True)``). For torch and
        triton: the kernel itself (autograd sees its operations; triton needs ``grad=True``).
        """
        if self._target.AUTOGRAD == "torch":
            return self
        if self._target.AUTOGRAD is not None:
            raise ValueError(f"the {self.target} target is differentiated by {self._target.AUTOGRAD} itself "
                             "(jax.grad through the kernel); torch_function() serves numba, c, torch and triton")
        if self.backward is None:
            raise ValueError("torch_function() needs the generated backward: compile with grad=True")
        from galinear.compiler.autograd import make_function

        return make_function(self)

    # ---------------------------------------------------------------- checks
    def verify(self, n: int = 64, seed: int = 0, dtypes=("float64", "float32"), clifford: bool = True):
        """Compare with the numeric :class:`galinear.MultiVector` evaluation of the function (and
        the ``clifford`` package where it has the signature) on random inputs; see
        :func:`galinear.compiler.verify.verify_kernel`."""
        from galinear.compiler.verify import verify_kernel

        return verify_kernel(self, n=n, seed=seed, dtypes=dtypes, clifford=clifford)


class KernelPair(tuple):
    """``(forward, backward)`` from ``compile(..., grad=True)``; calls go to the forward kernel."""

    def __new__(cls, forward: Kernel):
        return super().__new__(cls, (forward, forward.backward))

    @property
    def forward(self) -> Kernel:
        return self[0]

    @property
    def backward(self) -> Kernel:
        return self[1]

    def __call__(self, *args, **kwargs):
        return self[0](*args, **kwargs)

    def torch_function(self):
        return self[0].torch_function()

    def verify(self, **options):
        return self[0].verify(**options)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self[0], name)
