"""The names of the replacement methods: their families, display names and size knobs.

Plain tables and string functions, shared by :mod:`galinear.compress.methods.catalogue` (which builds the
modules) and :mod:`galinear.compress.methods.budgets` (which sizes them), so neither imports the other
for a name.
"""
from __future__ import annotations

METHODS = ("rotor", "lr1", "lr4", "bh1", "dense", "zero", "lr1-cf", "lr4-cf", "bh1-cf", "rotorlin-m",
           "lr", "kron", "monarch", "bhh", "givens", "lr-cf", "kron-cf", "monarch-cf", "bhh-cf")
CLOSED_FORM = {"lr1": "lr1-cf", "lr4": "lr4-cf", "bh1": "bh1-cf",  # Adam-fitted name -> closed-form name
               "lr": "lr-cf", "kron": "kron-cf", "monarch": "monarch-cf", "bhh": "bhh-cf"}
DISPLAY = {"lr1-cf": "LR1*", "lr4-cf": "LR4*", "bh1-cf": "BH1*", "rotorlin-m": "RotorLinear (moments)",
           "lr-cf": "LR*", "kron-cf": "Kron*", "monarch-cf": "Monarch*", "bhh-cf": "BHH*"}
#: the knob of each method whose size is a setting (galinear.compress.methods.budgets); its MethodSpec field
KNOBS = {"lr": "rank", "bh1": "blocks", "kron": "terms", "monarch": "blocks", "bhh": "blocks", "rotor": "chunk",
         "givens": "chunk"}


def base_name(name: str) -> str:
    """The module family of a method: 'lr1-cf' -> 'lr1'."""
    return name[:-3] if name.endswith("-cf") else name


def display_name(name: str) -> str:
    """Name of a method in reports: LR1*, LR4*, BH1* for the closed-form fits, else the name."""
    return DISPLAY.get(name, name)


__all__ = ["METHODS", "CLOSED_FORM", "DISPLAY", "KNOBS", "base_name", "display_name"]
