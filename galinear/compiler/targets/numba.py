"""The numba target: ``kernel_serial`` and ``kernel_parallel`` over rows, ``cache=True``.

Generated module: both functions take the input arrays ``(N, k_i)``, the constants (an array of
the input dtype, so float32 code stays float32), the output arrays and a ``uint8`` status per row
(0, or 1 + the index of the guard that failed), and return the sum of ``v - v`` over the outputs
and of the rows' status codes (0 unless a value is inf or nan or a guard failed). Loaded through :func:`galinear._numba.load_generated`, called on
numpy arrays (``out=`` and ``parallel=``).

The printer (:class:`Rules`, :func:`print_program`) is :mod:`galinear.symbolic.numba_source`, the one
printer of all generated numba source: the shipped kernels (symbolic layer) print with it too, and a
module here could not be imported from there.
"""
from __future__ import annotations

import warnings

import numpy as np

from galinear._buffers import MIN_BYTES, empty
from galinear._numba import readonly
from galinear.compiler.targets._runtime import ArrayLoaded
from galinear.symbolic.numba_source import Rules, g_function_lines, print_program

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules", "g_function_lines",
           "PARALLEL_ROWS", "PARALLEL_MULTIPLICATIONS"]

NAME = "numba"
FILE_SUFFIX = ".py"
AUTOGRAD = None

#: ``parallel="auto"`` runs the ``prange`` variant for batches of at least this many rows when each
#: row costs at least PARALLEL_MULTIPLICATIONS (shorter programs are bound by memory traffic). The
#: default is the serial variant: in the side-by-side benchmark the prange variant with 2 threads
#: was slower than 1 thread on a fresh output array (docs/performance.md).
PARALLEL_ROWS = 16384
PARALLEL_MULTIPLICATIONS = 24


class Loaded(ArrayLoaded):
    TARGET = NAME

    def __init__(self, sources, name, guards, widths, out_widths, multiplications=0):
        super().__init__(sources, name, guards, widths, out_widths, multiplications)
        self._constant_arrays = {}
        self._no_status = np.zeros(1, np.uint8)  # never written: a program without guards

    def constants(self, dtype):
        """The kernel's constants in ``dtype`` (read-only, made once per dtype)."""
        cached = self._constant_arrays.get(dtype)
        if cached is None:
            cached = self._constant_arrays[dtype] = readonly(np.asarray(self.module.CONSTANTS, dtype))
        return cached

    def use_parallel(self, rows: int, parallel) -> bool:
        if parallel not in (False, True, "auto"):
            raise ValueError(f"parallel must be False, True or 'auto', got {parallel!r}")
        if parallel == "auto":
            return rows >= PARALLEL_ROWS and self.multiplications >= PARALLEL_MULTIPLICATIONS
        return bool(parallel)

    def run_arrays(self, arrays, names, out, parallel):
        return self.run_rows(arrays, names, out, parallel)

    def fast_call(self, single: bool):
        """The common call in a few microseconds: a function of the positional inputs (and ``out``)
        that runs the serial kernel when every input is a 2-D C-contiguous float32 or float64
        numpy array of the program's width, all of one dtype and one row count (and ``out``, if given, is what the
        general call would accept for them), and returns the output (``single``), the tuple of
        outputs or ``out``; or None, for the general path to handle (any other input, a
        failed guard, a non-finite value: the general path checks, warns or raises).

        Everything it skips, the general path would have done the same way; the results are the
        same arrays of the same values."""
        widths, out_widths = self.widths, self.out_widths
        serial, guards, no_status = self.module.kernel_serial, bool(self.guards), self._no_status
        f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
        constants = {}
        ndarray, count, max_width = np.ndarray, len(widths), max(out_widths)

        def call(args, out=None):
            if len(args) != count or type(args[0]) is not ndarray:
                return None
            dtype = args[0].dtype  # by identity: hashing a dtype costs microseconds
            if dtype is not f64 and dtype is not f32:
                return None
            rows = args[0].shape[0]
            flat = []
            for a, width in zip(args, widths):
                if type(a) is not ndarray or a.dtype is not dtype or a.shape != (rows, width):
                    return None
                flags = a.flags
                if not flags.c_contiguous:
                    return None
                if flags.writeable:  # readonly(a), inline
                    a = a.view()
                    a.setflags(write=False)
                flat.append(a)
            consts = constants.get(dtype.char)
            if consts is None:
                consts = constants[dtype.char] = self.constants(dtype)
            if out is None:
                small = rows * dtype.itemsize * max_width < MIN_BYTES  # numpy.empty: skip the pool's steps
                outs = [np.empty((rows, w), dtype) if small else empty((rows, w), dtype) for w in out_widths]
            else:
                outs = [out] if type(out) is ndarray else out
                if type(outs) not in (list, tuple) or len(outs) != len(out_widths):
                    return None
                for o, width in zip(outs, out_widths):
                    if type(o) is not ndarray or o.dtype is not dtype or o.shape != (rows, width) \
                            or not o.flags.c_contiguous or not o.flags.writeable:
                        return None
            status = np.empty(rows, np.uint8) if guards else no_status  # the kernel writes every row
            if serial(*flat, consts, *outs, status) != 0:  # an inf or nan, or a failed guard
                return None
            if out is not None:
                return out
            return outs[0] if single else tuple(outs)

        return call

    def run_flat(self, flat, names, outs, status, dtype, parallel):
        rows = flat[0].shape[0]
        fn = self.module.kernel_parallel if self.use_parallel(rows, parallel) else self.module.kernel_serial
        finite = fn(*[readonly(a) for a in flat], self.constants(dtype), *outs,
                    self._no_status if status is None else status)
        if finite != 0:  # nan and inf compare unequal to 0 as well
            self.check_finite(names, flat)
            if status is not None:
                self.raise_status(status)
            warnings.warn("the kernel produced inf or nan from finite inputs (overflow)", RuntimeWarning,
                          stacklevel=7)
