"""The :class:`Kernel`: a generated program loaded for its target, called on coefficient arrays.

Arrays hold the coefficients of the blades in ``input_blades[name]`` on their last axis, in that
order; leading axes broadcast (numpy rules) and the result has shape ``(..., len(output_blades))``.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np

from galinear._numba import generated_folder, load_generated, readonly
from galinear.compiler.build import Built, grad_input_name, metric_of
from galinear.symbolic.trace import KernelDomainError

__all__ = ["Kernel", "KernelPair", "PARALLEL_ROWS"]

#: ``parallel="auto"`` runs the numba kernel's ``prange`` variant for batches of at least this many
#: rows when each row costs at least PARALLEL_MULTIPLICATIONS (shorter programs are bound by memory
#: traffic). The default is the serial variant: in the side-by-side benchmark the prange variant with
#: 2 threads was slower than 1 thread on a fresh output array (docs/performance.md).
PARALLEL_ROWS = 16384
PARALLEL_MULTIPLICATIONS = 24


def _module_folder() -> Path:
    folder = generated_folder().parent / "galinear_compiled_src"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        folder = generated_folder()
    return folder


def _load_module(source: str, tag: str):
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:24]
    name = f"galinear_compiled_{tag}_{digest}"
    return load_generated(name, _module_folder() / f"{name}.py", source)


def _compile_c(source: str, header: str, name: str) -> ctypes.CDLL:
    digest = hashlib.sha256((source + header).encode("utf-8")).hexdigest()[:24]
    folder = _module_folder() / f"c_{name}_{digest}"
    lib = folder / f"lib{name}.so"
    if not lib.exists():
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not compiler:
            raise RuntimeError("the C target needs a C compiler: install one (apt install gcc) or set CC")
        from galinear._io import atomic_write_text

        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_text(str(folder / f"{name}.c"), source)
        atomic_write_text(str(folder / f"{name}.h"), header)
        tmp = folder / f".lib{name}.{os.getpid()}.so"
        result = subprocess.run([compiler, "-O2", "-std=c99", "-shared", "-fPIC", "-o", str(tmp),
                                 str(folder / f"{name}.c"), "-lm"], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{compiler} could not compile the generated C kernel:\n{result.stderr}")
        os.replace(tmp, lib)
    return ctypes.CDLL(str(lib))


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


class _Loaded:
    """One program (forward or backward) loaded for a target."""

    def __init__(self, target: str, source: str, header: str | None, name: str, guards: tuple,
                 widths: tuple, out_widths: tuple, multiplications: int = 0):
        self.target, self.name, self.guards = target, name, guards
        self.multiplications = multiplications
        self._constant_arrays = {}
        self._no_status = np.zeros(1, np.uint8)  # never written: a program without guards
        self.widths, self.out_widths = widths, out_widths
        if target == "c":
            lib = _compile_c(source, header, name)
            self.c_functions = {}
            for dtype, suffix, ctype in ((np.float64, "f64", ctypes.c_double), (np.float32, "f32", ctypes.c_float)):
                fn = getattr(lib, f"{name}_{suffix}")
                ptr = ctypes.POINTER(ctype)
                fn.argtypes = ([ptr] * (len(widths) + len(out_widths)) + [ctypes.c_longlong,
                                                                           ctypes.POINTER(ctypes.c_uint8)])
                fn.restype = ctypes.c_int
                self.c_functions[np.dtype(dtype)] = (fn, ptr)
            self.module = None
        else:
            if target == "triton":
                _require_triton()
            self.module = _load_module(source, f"{name}_{target}")

    # -- helpers
    def _raise_status(self, status) -> None:
        codes = np.asarray(status).reshape(-1)
        bad = np.flatnonzero(codes)
        if bad.size:
            code = int(codes[bad[0]])
            rows = ", ".join(str(int(r)) for r in bad[:5]) + (", ..." if bad.size > 5 else "")
            raise KernelDomainError(
                f"{self.guards[code - 1]} at {bad.size} of {codes.size} rows (rows {rows}); "
                "give inputs inside the domain of every step (an invertible argument of inv() and /, a "
                "non-negative argument of sqrt())")

    def _flat(self, arrays):
        dtype = np.result_type(*arrays)
        if dtype not in (np.float32, np.float64):
            dtype = np.dtype(np.float64) if dtype.kind in "biu" or dtype == np.float16 or dtype.kind == "f" \
                else None
            if dtype is None:
                raise TypeError(f"kernels take real float arrays; got {np.result_type(*arrays)}")
        lead = arrays[0].shape[:-1]
        if any(a.shape[:-1] != lead for a in arrays[1:]):
            lead = np.broadcast_shapes(*(a.shape[:-1] for a in arrays))
            arrays = [np.broadcast_to(a, lead + (a.shape[-1],)) for a in arrays]
        flat = [np.ascontiguousarray(a, dtype).reshape(-1, a.shape[-1]) for a in arrays]
        return flat, lead, dtype

    def _constants(self, dtype):
        """The numba kernel's constants in ``dtype`` (read-only, made once per dtype)."""
        cached = self._constant_arrays.get(dtype)
        if cached is None:
            cached = self._constant_arrays[dtype] = readonly(np.asarray(self.module.CONSTANTS, dtype))
        return cached

    def _check_finite(self, names, flat) -> None:
        for name, a in zip(names, flat):
            if not np.isfinite(a).all():
                row = int(np.flatnonzero(~np.isfinite(a).all(axis=-1))[0])
                raise ValueError(f"input {name!r} holds inf or nan (first at row {row}); kernels take finite "
                                 "coefficients")

    def _outputs(self, out, lead, rows, dtype):
        """Fresh output arrays, or the caller's ``out`` checked (numpy's ``out=`` convention)."""
        if out is None:
            return [np.empty((rows, w), dtype) for w in self.out_widths], None
        given = out if isinstance(out, tuple) else (out,)
        if len(given) != len(self.out_widths):
            raise ValueError(f"out must hold {len(self.out_widths)} array(s), got {len(given)}")
        flat = []
        for o, w in zip(given, self.out_widths):
            shape = lead + (w,)
            if not isinstance(o, np.ndarray) or o.shape != shape or o.dtype != dtype \
                    or not o.flags.c_contiguous or not o.flags.writeable:
                got = (getattr(o, "shape", None), getattr(o, "dtype", None))
                raise ValueError(f"out must be a writable C-contiguous {np.dtype(dtype).name} array of shape "
                                 f"{shape}; got shape and dtype {got}")
            flat.append(o.reshape(rows, w))
        return flat, given

    def use_parallel(self, rows: int, parallel) -> bool:
        if parallel not in (False, True, "auto"):
            raise ValueError(f"parallel must be False, True or 'auto', got {parallel!r}")
        if parallel == "auto":
            return rows >= PARALLEL_ROWS and self.multiplications >= PARALLEL_MULTIPLICATIONS
        return bool(parallel)

    def run_numpy_like(self, arrays, names, out=None, parallel=False):
        """numba, c and numpy: numpy arrays in, numpy arrays out."""
        if self.target == "numpy":
            if out is not None:
                raise ValueError("out= is offered by the numba and c targets")
            dtype = np.result_type(*arrays)
            if dtype not in (np.float32, np.float64):
                dtype = np.dtype(np.float64)
            arrays = [a.astype(dtype, copy=False) for a in arrays]
            self._check_finite(names, [a.reshape(-1, a.shape[-1]) for a in arrays])
            with np.errstate(all="ignore"):
                outs, status = self.module.kernel(*arrays)
            if status is not None:
                self._raise_status(status)
            return outs
        flat, lead, dtype = self._flat(arrays)
        rows = flat[0].shape[0]
        outs, given = self._outputs(out, lead, rows, dtype)
        status = np.zeros(rows, np.uint8) if self.guards else self._no_status  # written only by guards
        if self.target == "numba":
            fn = self.module.kernel_parallel if self.use_parallel(rows, parallel) else self.module.kernel_serial
            finite = fn(*[readonly(a) for a in flat], self._constants(dtype), *outs, status)
            if finite != 0:  # nan and inf compare unequal to 0 as well
                self._check_finite(names, flat)
                self._raise_status(status)
                warnings.warn("the kernel produced inf or nan from finite inputs (overflow)", RuntimeWarning,
                              stacklevel=4)
        else:
            self._check_finite(names, flat)
            fn, ptr = self.c_functions[np.dtype(dtype)]
            fn(*[a.ctypes.data_as(ptr) for a in flat], *[o.ctypes.data_as(ptr) for o in outs], rows,
               status.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)) if self.guards else None)
        if self.guards:
            self._raise_status(status)
        if given is not None:
            return given
        return tuple(o.reshape(lead + (o.shape[-1],)) for o in outs)

    def run_torch(self, tensors, check: bool = True):
        import torch

        if self.target == "triton":
            lead = torch.broadcast_shapes(*(t.shape[:-1] for t in tensors))
            flat = [t.expand(*lead, t.shape[-1]).reshape(-1, t.shape[-1]).contiguous() for t in tensors]
            outs, status = self.module.kernel(*flat)
            if check:
                self._raise_status(status.cpu().numpy())
            return tuple(o.reshape(*lead, o.shape[-1]) for o in outs)
        outs, status = self.module.kernel(*tensors)
        if check and status is not None and not _tracing(status):
            if bool((status != 0).any()):
                self._raise_status(status.detach().cpu().numpy())
        return outs


def _tracing(t) -> bool:
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


def _require_triton() -> None:
    try:
        import triton  # noqa: F401
    except ImportError:
        raise RuntimeError("the triton target needs triton: pip install 'galinear[triton]'") from None
    import torch

    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("Triton kernels run on a CUDA GPU; without one set TRITON_INTERPRET=1 (before "
                           "importing triton) to run them in Triton's interpreter on the CPU")


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
        self._program = _Loaded(self.target, self.source, self.header, name, guards, widths, out_widths,
                                self.operations.get("multiplications", 0))
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
        array = result.detach().cpu().numpy() if _is_tensor(result) else np.asarray(result)
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
        options = {k: kwargs.pop(k) for k in ("out", "parallel") if k in kwargs and k not in self.input_blades}
        return self.run(args, kwargs, **options)

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
        tensors = any(_is_tensor(v) for v in values)
        many = len(self._program.out_widths) > 1 or self.is_backward  # a backward: one gradient per input
        if self.target in ("torch", "triton"):
            import torch

            if out is not None:
                raise ValueError("out= is offered by the numba and c targets")
            if not tensors:
                values = [torch.as_tensor(np.asarray(v)) for v in values]
            else:
                values = [v if _is_tensor(v) else torch.as_tensor(np.asarray(v)) for v in values]
            dtype = values[0].dtype
            for v in values[1:]:
                dtype = torch.promote_types(dtype, v.dtype)
            if not dtype.is_floating_point:
                dtype = torch.float64
            values = [v.to(dtype) for v in values]
            outs = self._program.run_torch(values)
            if not tensors:
                outs = tuple(o.detach().cpu().numpy() for o in outs)
            return outs if many else outs[0]
        if tensors:
            raise TypeError(f"the {self.target} target takes numpy arrays; use kernel.torch_function() for "
                            "tensors (autograd through the generated backward) or target='torch'")
        arrays = [np.asarray(v) for v in values]
        outs = self._program.run_numpy_like(arrays, names, out, parallel)
        return outs if many else outs[0]

    # ---------------------------------------------------------------- torch
    def torch_function(self):
        """A differentiable function on tensors.

        For numba and C: one ``torch.autograd.Function`` whose forward is this kernel and whose
        backward is the generated backward kernel (``compile(..., grad=True)``). For torch and
        triton: the kernel itself (autograd sees its operations; triton needs ``grad=True``).
        """
        if self.target == "torch":
            return self
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
