"""galinear: exact Clifford-algebra maths, fast rotor layers, rotor compression of linear layers.

Three layers, each usable alone:

- ``galinear.symbolic`` (sympy): closed forms, proofs and kernel generation;
- ``galinear.core`` (numpy + numba): batched multivector maths, exposed as :class:`Algebra`;
- ``galinear.nn`` (torch): differentiable rotor layers and baselines.

``import galinear`` is cheap: numba, sympy and torch load only when their layer is used.
"""
from importlib import import_module as _import_module

from galinear._version import __version__

__all__ = ["__version__", "Algebra", "MultiVector", "blades", "core", "symbolic", "nn", "compile", "prove", "Kernel"]

_LAZY = {
    "Algebra": ("galinear.core", "Algebra"),
    "MultiVector": ("galinear.core.algebra", "MultiVector"),
    "blades": ("galinear.blades", None),
    "core": ("galinear.core", None),
    "symbolic": ("galinear.symbolic", None),
    "nn": ("galinear.nn", None),
    "compile": ("galinear.compiler", "compile"),
    "prove": ("galinear.compiler", "prove"),
    "Kernel": ("galinear.compiler", "Kernel"),
}


def __getattr__(name):
    try:
        module_name, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'galinear' has no attribute {name!r}") from None
    module = _import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
