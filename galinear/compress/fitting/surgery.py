"""Model surgery: replacement modules put in place of a model's projections, and fitted ones
frozen.

``swapped(model, replacements)`` puts replacement modules in place of projections for the
duration of a ``with`` block and always restores the originals; :func:`freeze` puts a fitted
replacement in eval mode without gradients.
"""
from __future__ import annotations

import contextlib

from galinear.lm.models import projection, set_projection


@contextlib.contextmanager
def swapped(model, replacements: dict):
    """Temporarily replace projections: ``replacements[(layer, "q_proj")] = module``."""
    originals = {}
    try:
        for (layer, name), module in replacements.items():
            originals[(layer, name)] = projection(model, layer, name)
            set_projection(model, layer, name, module)
        yield model
    finally:
        for (layer, name), module in originals.items():
            set_projection(model, layer, name, module)


def freeze(module):
    """Eval mode, no gradients; returns the module."""
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


__all__ = ["freeze", "swapped"]
