r"""Sandwich maps x -> R x S~ from factor pairs, through a registry of backends.

``"dense"`` builds the 2**n x 2**n matrix, ``"factored"`` applies the simple rotors directly with
signed permutations, ``"spinor"`` multiplies the matrices of x and of the rotors in the matrix
representation of Cl(n) (:mod:`galinear.nn.functional.spinor`); other backends (e.g. ``"numba"``) are registered by name, lazily as
``"module:function"`` strings imported on first use.

This module holds the registry and runs backends; it chooses none. Which backend ``"auto"`` means,
and the replacement by ``"factored"`` under autograd, are the rules of
:func:`galinear.nn.functional.plan.plan`, the same for
:func:`~galinear.nn.functional.sandwich.rotor_sandwich` (which runs the maps, in
:mod:`galinear.nn.functional.sandwich`) and the rotor layers.

A backend is a forward map ``fn(x, VL, WL, VR, WR) -> y``; the transposed map is the same call
with the factors of the reversed rotors (:func:`galinear.nn.dexp.transposed_factors`), which is
all the exact gradient of :mod:`galinear.nn.dexp` needs. Only backends registered with
``differentiable=True`` ("dense" and "factored": differentiable torch operations) carry autograd
through the map; where :func:`~galinear.nn.functional.sandwich.rotor_sandwich` needs that (x or a factor requires gradients and
grad mode is on) and the chosen backend computes values only, the plan runs ``"factored"``
instead: the same map, equal to rounding.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable

import torch

from galinear.nn.functional.rotors import (
    _apply_left_rotors,
    _apply_right_reversed_rotors,
    _SwapOuterAxes,
    sandwich_matrix,
    simple_rotor_coefficients,
)


def _dense_backend(x, VL, WL, VR, WR):
    right = None if VR is None else (VR, WR)
    matrix = sandwich_matrix((VL, WL), right)  # (P, d, d)
    return torch.einsum("pcd,...pd->...pc", matrix, x)


def _factored_backend(x, VL, WL, VR, WR):
    if VL.shape[-2] == 0:
        return x
    lead, (P, d) = x.shape[:-2], x.shape[-2:]
    xt = _SwapOuterAxes.apply(x.reshape(-1, P, d))  # (d, P, B): rows gathered whole
    cos_l, sinc_l = simple_rotor_coefficients(VL, WL)
    yt = _apply_left_rotors(xt, VL, WL, cos_l, sinc_l)
    if VR is None:
        VR, WR, cos_r, sinc_r = VL, WL, cos_l, sinc_l
    else:
        cos_r, sinc_r = simple_rotor_coefficients(VR, WR)
    yt = _apply_right_reversed_rotors(yt, VR, WR, cos_r, sinc_r)
    return _SwapOuterAxes.apply(yt).reshape(*lead, P, d)


@dataclass
class SandwichBackend:
    """One registry entry: ``fn(x, VL, WL, VR, WR) -> y`` or a lazy "module:function" string.

    ``differentiable``: whether autograd through ``fn`` gives the gradients of the map (else
    :func:`~galinear.nn.functional.sandwich.rotor_sandwich` runs ``"factored"`` where gradients through the map are needed).
    """

    name: str
    fn: Callable | str
    devices: tuple[str, ...] | None
    dtypes: tuple[torch.dtype, ...]
    priority: int
    differentiable: bool = False

    def supports(self, device: torch.device, dtype: torch.dtype) -> bool:
        device_ok = self.devices is None or torch.device(device).type in self.devices
        return device_ok and dtype in self.dtypes

    def load(self) -> Callable:
        if isinstance(self.fn, str):
            module_name, _, attribute = self.fn.partition(":")
            module = importlib.import_module(module_name)
            self.fn = getattr(module, attribute)
        return self.fn


_FLOAT_TYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_REGISTRY: dict[str, SandwichBackend] = {}
#: Priority of "numba" in the registry ("spinor" has 15, "factored" 10, "dense" 0): below
#: "factored", so that the registry's best is never "numba"; it runs where it is named
#: (``backend="numba"``), see docs/performance.md.
NUMBA_PRIORITY = 5
#: Lazy entries whose module is optional (numba may be missing or broken). Each is imported once,
#: on the first backend lookup; one that cannot be imported is dropped from the registry and its
#: module's state kept in ``_PLUGIN_STATE``, so a broken optional backend never breaks the others.
OPTIONAL_BACKENDS = ("numba",)
_PLUGIN_STATE: dict[str, str] = {}
#: Called after every change of the registry (the plan cache drops its remembered plans).
_ON_CHANGE: list[Callable[[], None]] = []


def _changed() -> None:
    for hook in _ON_CHANGE:
        hook()


def register_sandwich_backend(name, fn, *, devices=("cpu",), dtypes=(torch.float32, torch.float64), priority=0,
                              differentiable=False):
    """Add (or replace) a sandwich backend.

    Parameters
    ----------
    name : str, not "auto".
    fn : callable ``fn(x, VL, WL, VR, WR) -> y`` (x (..., P, 2**n), factors (P, k, n), VR = WR
        = None for single rotors) or a lazy ``"module:function"`` string imported on first use.
        It only has to compute values: the exact gradient uses the same call with transposed
        factors.
    devices : device types it supports (e.g. ("cpu", "cuda")), or None for every device.
    dtypes : dtypes it supports.
    priority : where the plan's own rules do not apply (see :func:`galinear.nn.functional.plan.plan`),
        "auto" means the supporting backend with the highest priority.
    differentiable : True if autograd through ``fn`` gives the map's gradients; otherwise
        :func:`~galinear.nn.functional.sandwich.rotor_sandwich` runs "factored" where gradients through the map are needed.
    """
    if not isinstance(name, str) or not name or name == "auto":
        raise ValueError(f"a backend name must be a non-empty string other than 'auto', got {name!r}")
    if not (callable(fn) or (isinstance(fn, str) and ":" in fn)):
        raise TypeError(f"fn must be callable or a 'module:function' string, got {fn!r}")
    _REGISTRY[name] = SandwichBackend(
        name, fn, None if devices is None else tuple(devices), tuple(dtypes), int(priority), bool(differentiable)
    )
    _changed()


def unregister_sandwich_backend(name: str) -> None:
    """Remove backend ``name`` from the registry (nothing happens if it is not registered)."""
    if _REGISTRY.pop(name, None) is not None:
        _changed()


def sandwich_backend_entry(name: str) -> SandwichBackend:
    """The registry entry of backend ``name`` (its devices, dtypes, priority, differentiability)."""
    _load_plugins()
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(
            f"unknown sandwich backend {name!r}; registered: {sorted(_REGISTRY)}; optional modules: {_PLUGIN_STATE}"
        )
    return entry


register_sandwich_backend("dense", _dense_backend, devices=None, dtypes=_FLOAT_TYPES, priority=0,
                          differentiable=True)
register_sandwich_backend("factored", _factored_backend, devices=None, dtypes=_FLOAT_TYPES, priority=10,
                          differentiable=True)




def _register_numba() -> None:
    """The compiled CPU kernels of :mod:`galinear.nn.numba_backend`, registered by name (imported on use)."""
    register_sandwich_backend(
        "numba", "galinear.nn.numba_backend:numba_sandwich", devices=("cpu",),
        dtypes=(torch.float32, torch.float64), priority=NUMBA_PRIORITY,
    )


_register_numba()


def _load_plugins():
    for name in OPTIONAL_BACKENDS:
        entry = _REGISTRY.get(name)
        if entry is None or not isinstance(entry.fn, str):
            continue
        module_name = entry.fn.partition(":")[0]
        if module_name in _PLUGIN_STATE:
            continue
        try:
            found = importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            _PLUGIN_STATE[module_name] = "not installed"
            del _REGISTRY[name]
            continue
        try:
            entry.load()
            _PLUGIN_STATE[module_name] = "loaded"
        except Exception as error:  # a broken optional plugin must not break the built-in backends
            _PLUGIN_STATE[module_name] = f"failed: {type(error).__name__}: {error}"
            del _REGISTRY[name]


def available_sandwich_backends(device=None, dtype=None) -> list[str]:
    """Names of the registered backends (supporting ``device``/``dtype`` when given), best first."""
    _load_plugins()
    entries = sorted(_REGISTRY.values(), key=lambda entry: -entry.priority)
    return [
        entry.name
        for entry in entries
        if (device is None or dtype is None) or entry.supports(torch.device(device), dtype)
    ]


def _check_factors(label, pair, P, n):
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        raise TypeError(f"{label} must be a pair (V, W) of tensors, got {type(pair).__name__}")
    V, W = pair
    k = n // 2
    for part, tensor in (("V", V), ("W", W)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{label} {part} must be a torch.Tensor")
        if tuple(tensor.shape) != (P, k, n):
            raise ValueError(
                f"{label} {part} must have shape (P, k, n) = ({P}, {k}, {n}) for x of shape "
                f"(B, {P}, {2**n}), got {tuple(tensor.shape)}"
            )
