"""Small pieces shared by the stages of :mod:`galinear.nn.functional`."""
from __future__ import annotations

import torch

from galinear.nn._eager import eager_under_compile

_HALF_TYPES = (torch.float16, torch.bfloat16)
#: Constant tables per (kind, n, device[, dtype]), built once from galinear.blades.
_TABLE_CACHE: dict = {}


def _compiling() -> bool:
    try:
        return bool(torch.compiler.is_compiling())
    except AttributeError:  # pragma: no cover - very old torch
        return False


_IS_WRAPPED = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
_IS_EXPORTING = getattr(torch.compiler, "is_exporting", None)


def _wrapped(t) -> bool:
    """Whether ``t`` is wrapped by a torch.func transform (vmap, grad, jacrev, functional_call
    under them): such tensors have no storage and no data pointer."""
    if _IS_WRAPPED is None or t is None or _compiling():  # a compiled graph holds plain tensors
        return False
    return bool(_IS_WRAPPED(t))


_CURRENT_LEVEL = getattr(torch._C._functorch, "maybe_current_level", None)


def _capturing() -> bool:
    """Whether this call is being captured or transformed (torch.compile, torch.jit.trace,
    torch.export, or inside a torch.func transform such as vmap, grad or jacrev). Then a layer
    keeps to plain torch operations: no caches keyed on storage, no compiled kernels, no checks
    that read values into Python. Cheap: it runs on every call of a layer."""
    if _compiling() or torch._C._get_tracing_state() is not None:
        return True
    if _IS_EXPORTING is not None and _IS_EXPORTING():
        return True
    return _CURRENT_LEVEL is not None and _CURRENT_LEVEL() is not None


class _Untraced:
    """Pauses torch.jit.trace's recording (no-op when not tracing): what runs inside enters the
    traced graph as constants. Used for the matrices of a layer's inference path."""

    def __enter__(self):
        self.state = torch._C._get_tracing_state()
        if self.state is not None:
            torch._C._set_tracing_state(None)

    def __exit__(self, *exc):
        if self.state is not None:
            torch._C._set_tracing_state(self.state)
        return False


def cached_table(build):
    """Decorator for the constant tables of the kernels: ``build(*args)`` runs once per argument
    tuple (devices keyed by name), eagerly even inside torch.compile (the builders read numpy
    tables), and later calls return the cached tensors, which compiled graphs take as constants."""
    eager = eager_under_compile(build)
    name = build.__qualname__

    def lookup(*args):
        key = (name, *(str(a) if isinstance(a, torch.device) else a for a in args))
        tables = _TABLE_CACHE.get(key)
        if tables is None:
            tables = _TABLE_CACHE[key] = eager(*args)
        return tables

    lookup.__name__, lookup.__qualname__, lookup.__doc__ = build.__name__, name, build.__doc__
    return lookup
