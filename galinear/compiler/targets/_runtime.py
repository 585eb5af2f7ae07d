"""What the targets' loaders share: the loader of generated modules, the status check, and the
calling convention of the targets that take numpy arrays (numba, numpy, C)."""
from __future__ import annotations

import numpy as np

from galinear._buffers import empty
from galinear._numba import load_generated
from galinear.symbolic.trace import KernelDomainError

__all__ = ["Loaded", "ArrayLoaded", "load_module", "is_tensor"]


def load_module(source: str):
    """The module of ``source``: the generated module of kind ``compiled`` keyed by its text
    (``galinear_compiled/compiled_<digest>.py``, used only when it holds exactly ``source``;
    :func:`galinear._numba.load_generated`)."""
    return load_generated("compiled", source, source)


def is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


class Loaded:
    """One program (forward or backward) loaded for a target; subclasses run it.

    ``TARGET`` names the target; a generated Python module (every target but C) is loaded here
    as ``self.module``."""

    TARGET = ""
    PYTHON_MODULE = True

    def __init__(self, sources, name: str, guards: tuple, widths: tuple, out_widths: tuple,
                 multiplications: int = 0):
        self.name, self.guards = name, guards
        self.multiplications = multiplications
        self.widths, self.out_widths = widths, out_widths
        self.module = load_module(sources.text) if self.PYTHON_MODULE else None

    def run(self, values, names, out=None, parallel=False) -> tuple:
        raise NotImplementedError

    def fast_call(self, single: bool):
        """A quicker function of the positional inputs for the common case, returning None where
        the general call must handle it (see the numba target); None when the target has none."""
        return None

    def raise_status(self, status) -> None:
        """Raise :class:`KernelDomainError` naming the first failed guard and its rows, if any."""
        codes = np.asarray(status).reshape(-1)
        bad = np.flatnonzero(codes)
        if bad.size:
            code = int(codes[bad[0]])
            rows = ", ".join(str(int(r)) for r in bad[:5]) + (", ..." if bad.size > 5 else "")
            raise KernelDomainError(
                f"{self.guards[code - 1]} at {bad.size} of {codes.size} rows (rows {rows}); "
                "give inputs inside the domain of every step (an invertible argument of inv() and /, a "
                "non-negative argument of sqrt())")

    @staticmethod
    def check_finite(names, flat) -> None:
        for name, a in zip(names, flat):
            if not np.isfinite(a).all():
                row = int(np.flatnonzero(~np.isfinite(a).all(axis=-1))[0])
                raise ValueError(f"input {name!r} holds inf or nan (first at row {row}); kernels take finite "
                                 "coefficients")

    @staticmethod
    def refuse_out(out) -> None:
        if out is not None:
            raise ValueError("out= is offered by the numba and c targets")


class ArrayLoaded(Loaded):
    """A target called on numpy arrays (numba, numpy, C): tensors are refused with the way on."""

    def run(self, values, names, out=None, parallel=False) -> tuple:
        if any(is_tensor(v) for v in values):
            raise TypeError(f"the {self.TARGET} target takes numpy arrays; use kernel.torch_function() for "
                            "tensors (autograd through the generated backward) or target='torch'")
        return self.run_arrays([np.asarray(v) for v in values], names, out, parallel)

    def run_arrays(self, arrays, names, out, parallel) -> tuple:
        raise NotImplementedError

    # -- rows: the calling convention of numba and C (one flat (rows, width) array per input)
    def flat(self, arrays):
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

    def outputs(self, out, lead, rows, dtype):
        """Fresh output arrays, or the caller's ``out`` checked (numpy's ``out=`` convention)."""
        if out is None:
            return [empty((rows, w), dtype) for w in self.out_widths], None  # large ones recycled
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

    def run_rows(self, arrays, names, out, parallel) -> tuple:
        """Flatten, run :meth:`run_flat` on (rows, width) arrays, check the status, reshape."""
        flat, lead, dtype = self.flat(arrays)
        rows = flat[0].shape[0]
        outs, given = self.outputs(out, lead, rows, dtype)
        status = np.zeros(rows, np.uint8) if self.guards else None  # written only by guards
        self.run_flat(flat, names, outs, status, dtype, parallel)
        if self.guards:
            self.raise_status(status)
        if given is not None:
            return given
        return tuple(o.reshape(lead + (o.shape[-1],)) for o in outs)

    def run_flat(self, flat, names, outs, status, dtype, parallel) -> None:
        raise NotImplementedError
