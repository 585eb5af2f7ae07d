"""Keeping a function eager under torch.compile without importing the compiler with galinear.nn."""
from __future__ import annotations

import functools
import sys

import torch

__all__ = ["eager_under_compile"]

#: fn -> torch.compiler.disable(fn), made on the first call that may run under torch.compile.
_EAGER: dict = {}


def eager_under_compile(fn):
    """``torch.compiler.disable(fn)`` without importing ``torch._dynamo`` (seconds) when galinear
    is imported: decorates ``fn`` (a function or a method) so that torch.compile runs it eagerly,
    a graph break, as ``@torch.compiler.disable`` does.

    Until something has imported ``torch._dynamo`` (``torch.compile`` does), nothing can be
    compiling, and a call goes straight to ``fn``. From then on a call goes through
    ``torch.compiler.disable(fn)``, made once; made inside a compiled region, dynamo breaks the
    graph there as well."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "torch._dynamo" not in sys.modules:
            return fn(*args, **kwargs)
        eager = _EAGER.get(fn)
        if eager is None:
            eager = _EAGER[fn] = torch.compiler.disable(fn)
        return eager(*args, **kwargs)

    return call
