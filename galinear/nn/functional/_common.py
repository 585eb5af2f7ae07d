"""Small pieces shared by the stages of :mod:`galinear.nn.functional`."""
from __future__ import annotations

import torch

_HALF_TYPES = (torch.float16, torch.bfloat16)
#: Constant tables per (kind, n, device[, dtype]), built once from galinear.blades.
_TABLE_CACHE: dict = {}


def _compiling() -> bool:
    try:
        return bool(torch.compiler.is_compiling())
    except AttributeError:  # pragma: no cover - very old torch
        return False
