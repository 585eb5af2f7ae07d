r"""The one dispatcher of the rotor layers: which :class:`Path` a call runs, with which sandwich
backend function, and with how many threads.

:class:`~galinear.nn.RotorLinear`, :class:`~galinear.nn.RotorNetwork` (its training stages
included) and :func:`~galinear.nn.functional.rotor_sandwich` ask :func:`plan` once per call and
run what the returned :class:`Plan` says: its :attr:`Plan.path` selects the caller's runner from a
table (no other test of the path), and on a sandwich path :attr:`Plan.fn` is the backend
function itself, so nothing resolves a backend a second time. The thresholds are the constants of
:mod:`galinear._switch_points` (one place, each with the benchmark that measured it; the numba
kernels read one of them there too). They are stated in the rotor specification's documentation
and in docs/performance.md ("Which backend a rotor layer runs") too.

The paths: :attr:`Path.CHUNK_MATRICES` (every chunk pair's matrix in one batched call, then one
product), :attr:`Path.CACHED_MATRIX` (the assembled (out, in) matrix, cached), :attr:`Path.TRACED_MATRIX`
(that matrix as a constant of a torch.jit.trace graph), :attr:`Path.DECODE` (the compiled decoding
kernel), :attr:`Path.PARITY_BLOCKS` (a network stage's parity blocks in one batched product),
:attr:`Path.SPINOR` (the "spinor" backend), :attr:`Path.BACKEND` (another registered backend),
and for a whole network :attr:`Path.STACKED_MATRICES`, :attr:`Path.STAGES` and :attr:`Path.GADGETS`.
The backend option ``"dense"`` (:data:`MATRICES`) names one thing, the chunk-pair matrices: a layer
runs them as its chunk matrices, its cached matrix or its stage's parity blocks, whichever the call
suits, and a bare sandwich through the registered backend of that name.

A :class:`~galinear.nn.RotorLinear` call with ``backend="auto"`` (mode "inference": no autograd
and no warm-start update; "training" otherwise) runs what the first rule that applies says:

0. under a torch.autocast that lowers the parameters' dtype: :attr:`Path.AUTOCAST`; traced by
   torch.jit.trace: :attr:`Path.TRACED_MATRIX`;
1. captured or transformed (torch.compile, export, a torch.func transform): plain torch
   operations, threads as the caller set them: :attr:`Path.CACHED_MATRIX` in inference (not
   cached while captured), :attr:`Path.CHUNK_MATRICES` in training;
2. inference on at most ``MATRIX_MAX_INFERENCE_BATCH`` (32) tokens: on the CPU the compiled
   decoding kernel (:attr:`Path.DECODE`) when numba compiles, the chunks have n >= ``DECODE_MIN_N``
   (9) and the batch is one token or the (out, in) matrix has at least ``DECODE_MIN_ENTRIES``
   (2048 x 2048) entries; otherwise :attr:`Path.CACHED_MATRIX`;
3. chunks of n <= ``MATRIX_MAX_N`` (7) in training, n <= ``INFERENCE_MATRIX_MAX_N`` (9) in
   inference: the chunk matrices, :attr:`Path.CHUNK_MATRICES` in training and their assembled
   :attr:`Path.CACHED_MATRIX` in inference;
4. on the CPU and on CUDA ``"spinor"`` (:attr:`Path.SPINOR`), in inference and in training at any
   thread count (``python benchmarks/bench_contention.py [--training]``: the fastest backend in
   every cell, idle and beside a busy process; until its token blocks went to the caller's
   threads, training with more than one thread ran ``"numba"``); where these do not apply (other
   devices or dtypes, a backend missing from the registry) the registry's best for the device and
   dtype (:attr:`Path.BACKEND`: the supporting backend of highest priority; "numba" ranks below
   "factored", so it runs only where it is named). :func:`auto_backend` is this rule alone, and it
   is what :func:`~galinear.nn.functional.resolve_sandwich_backend` means by ``"auto"``.

A layer with ``gradient="power-step"`` under grad mode (``exact=False``) has autograd run through
the backend itself: a backend that computes values only (registered without
``differentiable=True``, e.g. "spinor" and "numba") is then replaced by ``"factored"``, the same
map in differentiable torch operations, at the same thread count.

A bare :func:`~galinear.nn.functional.rotor_sandwich` call (``sandwich=True``; mode "training"
when autograd runs through it) follows rules 1, 3 and 4 (it has no cached matrix and no decoding
kernel; its chunk matrices are the registered "dense" backend), and then the same replacement by
``"factored"`` under autograd. A bare call keeps the caller's thread count (its plan's ``threads``
is None; ``python benchmarks/bench_contention.py``, row "spinor map, caller's threads", times it).

A stage of a :class:`~galinear.nn.RotorNetwork` in training (its gadgets on one input,
``network_stage=True``) with ``backend="auto"`` and chunks of n <= ``NETWORK_BLOCKS_MAX_N`` (10)
runs :attr:`Path.PARITY_BLOCKS`: the parity blocks of all its chunk pairs in one batched product.

A named backend runs as named (rule "requested"); an unknown name raises a ValueError that lists
the valid ones. A :class:`~galinear.nn.RotorNetwork` (``network=True``) runs the whole network in
one call in inference on at most ``MATRIX_MAX_INFERENCE_BATCH`` tokens in float32 or float64: the
decoding kernel on the CPU when numba compiles and the kernel applies (no gadget has a bias),
the stacked matrices (:attr:`Path.STACKED_MATRICES`) otherwise; under autograd (not captured, not
under autocast) :attr:`Path.STAGES`, with one plan per stage in :attr:`Plan.stages` (the stage
rule above, or :attr:`Path.GADGETS` for a stage whose gadgets cannot run as one map); in every
other case :attr:`Path.GADGETS`: each gadget plans its own call.

Threads, one policy for torch's intra-op pool (OpenMP, and MKL through it) and numba's parallel
loops: on the CPU a backend of ``SERIAL_BACKENDS`` ("spinor", "factored") runs its call with one
intra-op thread. Such a backend is many small parallel operations, each ending at a barrier of the
pool; with one other busy process on the machine every barrier costs a scheduler quantum, and two
threads became 22x slower than one. "spinor" still uses the caller's cores: its token blocks are
shared among as many Python threads as the caller had, each block computed serially
(:func:`galinear.nn.functional.threads.for_each_block`), so no thread waits for another. The other
paths keep the caller's count: the matrix paths are one GEMM per call (a handful in training),
"numba" one parallel region, and the decoding kernels are serial. :class:`intra_op_threads` (from
:mod:`galinear.nn.functional.threads`) applies the count for the call, records the caller's, and
restores the previous counts on exit, also when the call raises. The backward pass of the exact
gradient (:class:`galinear.nn.dexp.SandwichMap`), which autograd runs after the call has returned,
applies the same counts the same way; its bivector parts (one batched product or one parallel
loop) run with the caller's count (``gradient="power-step"`` differentiates the torch operations
of ``"factored"``, whose backward pass autograd runs with the caller's count).

What runs inside a path is chosen here too, and carried by the plan, so that a backend only
executes it: :attr:`Plan.options` are the keyword options the plan's backend function is called
with (:attr:`Plan.fn` binds them): the "spinor" backend's transforms between multivectors and
matrices (``transform``, :func:`spinor_transform`) and the "numba" backend's kernel (``kernel``,
:func:`numba_kernel`); :attr:`Plan.parts` is how the exact gradient sums the bivector parts
(:func:`bivector_parts_method`). The same functions answer a backend called without a plan (a
direct call of the backend function, or :func:`~galinear.nn.dexp.exact_rotor_sandwich` given a
backend by name): its option "auto" asks them. The environment variable
``GALINEAR_SPINOR_TRANSFORM`` (:data:`SPINOR_TRANSFORM_ENV`), a user's override of the spinor
transforms, is read in one place, :func:`transform_setting`, at every :func:`plan` call.

Plans are remembered per argument tuple, so that asking costs a few microseconds per call;
:func:`forget_plans` drops them (after registering a backend, say).
"""
from __future__ import annotations

import enum
import functools
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import torch

from galinear._switch_points import (
    CORRELATION_LIMIT,
    DECODE_MIN_ENTRIES,
    DECODE_MIN_N,
    INFERENCE_MATRIX_MAX_N,
    MATRIX_MAX_INFERENCE_BATCH,
    MATRIX_MAX_N,
    NETWORK_BLOCKS_MAX_N,
    SERIAL_BACKENDS,
)
from galinear.nn._kernel_rules import NUMBA_KERNELS, numba_kernel
from galinear.nn.functional import backends
from galinear.nn.functional._common import _capturing, _compiling
from galinear.nn.functional.threads import intra_op_threads

__all__ = [
    "MATRICES",
    "MODES",
    "NUMBA_KERNELS",
    "SPINOR_TRANSFORMS",
    "SPINOR_TRANSFORM_ENV",
    "Path",
    "Plan",
    "auto_backend",
    "bivector_parts_method",
    "forget_plans",
    "intra_op_threads",
    "numba_kernel",
    "numba_kernels_usable",
    "numba_usable",
    "plan",
    "resolve_backend",
    "spinor_transform",
    "spinor_transform_for",
    "transform_setting",
]

#: What a call does: "training" (autograd or a warm-start update) or "inference".
MODES = ("training", "inference")
_WORK_DTYPES = (torch.float32, torch.float64)
#: The backend option that names the chunk-pair matrices instead of a sandwich backend: a layer
#: given it runs :attr:`Path.CHUNK_MATRICES` (training), :attr:`Path.CACHED_MATRIX` (inference) or,
#: as a RotorNetwork stage in training, :attr:`Path.PARITY_BLOCKS`: the same matrices in the form
#: the call suits; a bare :func:`~galinear.nn.functional.rotor_sandwich` the registered backend of
#: that name, which builds them (:attr:`Path.CHUNK_MATRICES`).
MATRICES = "dense"


class Path(enum.Enum):
    """The ways a call of a rotor layer (or of a bare sandwich) can run; :func:`plan` picks one."""

    #: every chunk pair's matrix in one batched call, then one product over the tokens
    CHUNK_MATRICES = "chunk matrices"
    #: the assembled (out, in) matrix, cached while the parameters do not change (inference)
    CACHED_MATRIX = "cached matrix"
    #: the assembled matrix as a constant of a torch.jit.trace graph
    TRACED_MATRIX = "traced matrix"
    #: under torch.autocast: the chunk matrices (or the assembled matrix in inference) in the
    #: parameters' dtype, the product over the tokens in the autocast dtype
    AUTOCAST = "autocast"
    #: the compiled decoding kernel (a layer's, or a whole network's in one call)
    DECODE = "decode"
    #: a RotorNetwork stage: the parity blocks of all its chunk pairs in one batched product
    PARITY_BLOCKS = "parity blocks"
    #: the "spinor" sandwich backend (the matrix representation of Cl(n))
    SPINOR = "spinor"
    #: another registered sandwich backend ("factored", "numba", a plug-in)
    BACKEND = "backend"
    #: a whole RotorNetwork in one call: its gadgets' matrices, the branches stacked
    STACKED_MATRICES = "stacked matrices"
    #: a RotorNetwork in training: stage by stage, each stage's plan in :attr:`Plan.stages`
    STAGES = "stages"
    #: a RotorNetwork gadget by gadget, each gadget planning its own call
    GADGETS = "gadgets"


_SANDWICH_PATHS = (Path.SPINOR, Path.BACKEND)


@dataclass(frozen=True)
class Plan:
    """What one call of a rotor layer runs.

    path : the :class:`Path`.
    backend : the sandwich backend's registered name where the path runs one (:attr:`Path.SPINOR`,
        :attr:`Path.BACKEND`, and the "dense" entry behind a bare sandwich's
        :attr:`Path.CHUNK_MATRICES`), else None.
    threads : intra-op threads to run the call with (1 for the backends of ``SERIAL_BACKENDS`` on
        the CPU); None: as the caller set them.
    rule : which rule chose it, in words.
    exact : whether a sandwich path runs the exact-gradient map of :mod:`galinear.nn.dexp` (the
        rotor layers with ``gradient="exact"``); False: autograd differentiates the backend itself.
    stages : for :attr:`Path.STAGES`, one plan per stage of the network (its gadgets on one input):
        :attr:`Path.PARITY_BLOCKS`, a sandwich path, or :attr:`Path.GADGETS` (each gadget's own call).
    options : on a sandwich path, the keyword options the backend function runs with, as
        ``((name, value), ...)``: ``transform`` for "spinor" (:func:`spinor_transform`), ``kernel``
        for "numba" (:func:`numba_kernel`); :attr:`fn` binds them.
    parts : on a sandwich path with the exact gradient, how its backward pass sums the bivector
        parts (:func:`bivector_parts_method`: "correlation", "numba" or "gather"), else None.
    """

    path: Path
    backend: str | None
    threads: int | None
    rule: str
    exact: bool = True
    stages: tuple = ()
    options: tuple = ()
    parts: str | None = None

    @property
    def decode(self) -> bool:
        """Whether the call runs the compiled decoding kernel."""
        return self.path is Path.DECODE

    @property
    def label(self) -> str:
        """The backend's name where one runs, else the path's name (for reports)."""
        return self.backend if self.backend is not None and self.path in _SANDWICH_PATHS else self.path.value

    @property
    def fn(self) -> Callable | None:
        """The callable of the sandwich backend the plan runs, ``fn(x, VL, WL, VR, WR) -> y``
        (None where it runs none): looked up in the registry at each use, so that a replaced
        entry takes effect at once."""
        return self.function()

    def function(self, device=None, dtype: torch.dtype | None = None) -> Callable | None:
        """:attr:`fn`; with a device and dtype (not None) :func:`resolve_backend` also checks that
        the backend supports them."""
        if self.backend is None:
            return None
        fn = resolve_backend(self.backend, device, dtype)
        return _bound(fn, self.options) if self.options else fn


class _Bound:
    """A backend function with keyword options bound: ``fn(*args, **keywords)``; its ``backward``
    (None where ``fn`` has none) is looked up on ``fn`` at each use, bound with the same options."""

    __slots__ = ("fn", "keywords")

    def __init__(self, fn: Callable, keywords: dict):
        self.fn, self.keywords = fn, keywords

    def __call__(self, *args):
        return self.fn(*args, **self.keywords)

    @property
    def backward(self) -> Callable | None:
        backward = getattr(self.fn, "backward", None)
        return None if backward is None else functools.partial(backward, **self.keywords)


@lru_cache(maxsize=64)
def _bound(fn: Callable, options: tuple) -> Callable:
    """``fn`` with those of its keyword ``options`` bound that it declares in ``fn.plan_options``."""
    accepted = getattr(fn, "plan_options", ())  # a replaced registry entry may take none of them
    keywords = {name: value for name, value in options if name in accepted}
    return _Bound(fn, keywords) if keywords else fn


def numba_usable() -> bool:
    """Whether numba imports and compiles (under NUMBA_DISABLE_JIT its loops would be plain Python,
    and the plans that run a compiled kernel take their torch path instead)."""
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a dependency
        return False
    return not config.DISABLE_JIT


def resolve_backend(name: str, device, dtype) -> Callable:
    """The callable of registered backend ``name``; with a device and dtype (not None) also checks
    that the backend supports them. Unknown names raise a ValueError that lists the valid ones."""
    if _compiling():
        entry = backends._REGISTRY.get(name)
        if entry is not None and not isinstance(entry.fn, str):
            return entry.fn
    backends._load_plugins()
    entry = backends._REGISTRY.get(name)
    if entry is None:
        raise ValueError(
            f"unknown sandwich backend {name!r}; valid: 'auto' or a registered name {sorted(backends._REGISTRY)}; "
            f"optional modules: {backends._PLUGIN_STATE}"
        )
    if device is not None and not entry.supports(torch.device(device), dtype):
        raise ValueError(
            f"sandwich backend {name!r} does not support device {device} with dtype {dtype} "
            f"(devices {entry.devices or 'any'}, dtypes {entry.dtypes}); use backend='auto'"
        )
    return entry.load()


def _available(name: str, device: torch.device, dtype: torch.dtype) -> bool:
    try:
        entry = backends.sandwich_backend_entry(name)
    except ValueError:
        return False
    return entry.supports(device, dtype)


def _threads(backend: str, device: torch.device) -> int | None:
    """1 for a backend of SERIAL_BACKENDS on the CPU, else None (the caller's count)."""
    return 1 if device.type == "cpu" and backend in SERIAL_BACKENDS else None


def _registry_best(device: torch.device, dtype: torch.dtype) -> str:
    """The supporting backend of highest priority that loads."""
    failures = []
    for name in backends.available_sandwich_backends(device, dtype):
        try:
            backends.sandwich_backend_entry(name).load()
        except Exception as error:  # a broken lazy entry: the next one
            failures.append(f"{name}: {error}")
            continue
        return name
    raise ValueError(f"no sandwich backend supports device {device} and dtype {dtype} ({failures})")


def _rotor_backend(device: torch.device, dtype: torch.dtype) -> tuple[str, str]:
    """(backend, why) for chunks above the matrix rule's limit."""
    if device.type in ("cpu", "cuda") and _available("spinor", device, dtype):
        return "spinor", "spinor"
    name = _registry_best(device, dtype)
    return name, f"{name} (the registry's best for {device.type} and {dtype})"


def auto_backend(device, dtype: torch.dtype) -> str:
    """The backend ``"auto"`` means for chunks above the matrix rule's limit (rule 4 of the module
    docstring): "spinor" on the CPU and CUDA, else the registry's best for the device and dtype."""
    return _rotor_backend(torch.device(device), dtype)[0]


def _backend_plan(name: str, threads: int | None, rule: str, exact: bool = True) -> Plan:
    """The plan that runs registered backend ``name`` (checked to exist)."""
    if name != MATRICES and name not in backends._REGISTRY:
        resolve_backend(name, None, None)  # loads the optional entries, or raises the listing error
    path = Path.SPINOR if name == "spinor" else Path.CHUNK_MATRICES if name == MATRICES else Path.BACKEND
    return Plan(path, name, threads, rule, exact)


def _differentiable_or_factored(chosen: Plan, device: torch.device, dtype: torch.dtype) -> Plan:
    """Under autograd a map without the exact gradient runs a backend registered ``differentiable``,
    else "factored"."""
    try:
        entry = backends.sandwich_backend_entry(chosen.backend)
    except ValueError:
        return chosen  # an unknown name: resolving it reports the error
    if entry.differentiable or not entry.supports(device, dtype):
        return chosen  # differentiable, or resolving it reports what it does not support
    return _backend_plan("factored", chosen.threads,
                         f"{chosen.rule}; {chosen.backend} computes values only: factored under autograd", chosen.exact)


def plan(n: int, batch: int, device, dtype: torch.dtype, mode: str, threads: int | None = None, *,
         backend: str = "auto", entries: int | None = None, network: bool = False,
         network_stage: bool = False, sandwich: bool = False, exact: bool = True,
         autograd: bool = False, decodes: bool = True, stages: tuple = (), autocast: bool = False) -> Plan:
    """The :class:`Plan` of one call (rules in the module docstring).

    Parameters
    ----------
    n : chunks of 2**n coefficients.
    batch : tokens of the call.
    device, dtype : of the computation (the layer's parameters).
    mode : "training" (autograd or a warm-start update) or "inference".
    threads : the caller's intra-op thread count (default ``torch.get_num_threads()``).
    backend : the layer's backend setting ("auto", "dense" (:data:`MATRICES`) or a registered name).
    entries : out_features x in_features of the layer (for the decoding rule).
    network : plan a whole RotorNetwork call instead of one gadget (``autograd``: autograd runs
        through it; ``decodes``: the decoding kernel can run it (no gadget has a bias);
        ``stages``: per stage (n, backend, structured), ``structured`` whether its gadgets can
        run as one map: exact gradient, no bias, n > 0).
    network_stage : plan one stage of a RotorNetwork (its gadgets on one input) instead of one gadget.
    sandwich : plan a bare :func:`~galinear.nn.functional.rotor_sandwich` call (mode "training":
        autograd runs through it).
    autocast : a layer's call under a torch.autocast that lowers its parameters' dtype.
    exact : the sandwich runs the exact-gradient map (a layer with ``gradient="exact"``, or any
        layer without grad mode, where both give the same values); False (``"power-step"`` under
        grad mode): autograd runs through the backend, which in training must then be differentiable.

    Plans are remembered per argument tuple (a call of a layer asks at every forward); after
    registering a backend or changing what numba can do, :func:`forget_plans` drops them.
    """
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string ('auto', 'dense' or a registered name), got {backend!r}")
    if autocast and not (network or sandwich):
        return _AUTOCAST
    if torch.jit.is_tracing() and not sandwich:
        return _TRACED_NETWORK if network else _TRACED
    if _capturing():
        return _captured(n, batch, device, dtype, mode, backend, network, sandwich, exact, transform_setting())
    if threads is None:
        threads = torch.get_num_threads()
    return _decide(n, batch, device, dtype, mode, threads, backend, entries, network, network_stage, sandwich,
                   exact, autograd, decodes, stages, transform_setting())


def forget_plans() -> None:
    """Drop the remembered plans (see :func:`plan`)."""
    _decide.cache_clear()
    _spinor_transform_of.cache_clear()
    _bound.cache_clear()


backends._ON_CHANGE.append(forget_plans)


_AUTOCAST = Plan(Path.AUTOCAST, None, None, "autocast: the matrices in the parameters' dtype, the product in "
                                              "the autocast dtype")
_TRACED = Plan(Path.TRACED_MATRIX, None, None, "traced: the matrix as a constant of the graph")
_TRACED_NETWORK = Plan(Path.STACKED_MATRICES, None, None, "traced: the stacked matrices as constants of the graph")
_CAPTURED_NETWORK = Plan(Path.GADGETS, None, None, "captured: gadget by gadget")


def _captured(n, batch, device, dtype, mode, backend, network, sandwich, exact, transforms) -> Plan:
    """Rule 1: a captured or transformed call keeps to plain torch operations (where a sandwich
    backend runs, its bivector parts too). Under torch.compile the backend's options stay unset
    (a backend that runs there is opaque to it and chooses at run time, as called without a plan)."""
    chosen = _captured_path(n, device, dtype, mode, backend, network, sandwich, exact)
    return _executable(chosen, n, batch, torch.device(device), dtype, transforms, plain=False,
                       options=not _compiling())


def _captured_path(n, device, dtype, mode, backend, network, sandwich, exact) -> Plan:
    if network:
        return _CAPTURED_NETWORK
    if backend == "auto" and not sandwich:
        path = Path.CACHED_MATRIX if mode == "inference" else Path.CHUNK_MATRICES
        return Plan(path, None, None, "captured: plain torch operations")
    if backend == "auto":
        chosen = _backend_plan(MATRICES, None, "captured: plain torch operations")
    elif backend == MATRICES and not sandwich:
        return _matrices(mode, False, "requested")
    else:
        chosen = _backend_plan(backend, None, "requested", exact and not sandwich)
    if mode == "training" and (sandwich or not exact):
        chosen = _differentiable_or_factored(chosen, torch.device(device), dtype)
    return Plan(chosen.path, chosen.backend, None, chosen.rule, chosen.exact)


def _matrices(mode: str, network_stage: bool, rule: str) -> Plan:
    """The chunk-pair matrices in the form the call suits."""
    if mode == "inference":
        return Plan(Path.CACHED_MATRIX, None, None, rule)
    if network_stage:
        return Plan(Path.PARITY_BLOCKS, None, None, rule)
    return Plan(Path.CHUNK_MATRICES, None, None, rule)


@lru_cache(maxsize=1024)
def _decide(n, batch, device, dtype, mode, threads, backend, entries, network, network_stage=False,
            sandwich=False, exact=True, autograd=False, decodes=True, stages=(), transforms="auto") -> Plan:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    device = torch.device(device)
    chosen = _choose(n, batch, device, dtype, mode, threads, backend, entries, network, network_stage, sandwich,
                     exact, autograd, decodes, stages, transforms)
    return _executable(chosen, n, batch, device, dtype, transforms)


def _executable(chosen: Plan, n: int, batch: int, device: torch.device, dtype: torch.dtype, transforms: str,
                plain: bool = True, options: bool = True) -> Plan:
    """``chosen`` with what runs inside its path: the backend's options (:attr:`Plan.options`;
    ``options`` False: none) and, with the exact gradient, the bivector-parts method
    (:attr:`Plan.parts`); ``plain``: the call's tensors are ordinary ones that may leave torch
    (not captured, not transformed)."""
    if chosen.path not in _SANDWICH_PATHS and not (chosen.path is Path.CHUNK_MATRICES and chosen.backend):
        return chosen
    parts = (bivector_parts_method(2**n, device, plain and dtype in _WORK_DTYPES) if chosen.exact else None)
    if not options:
        return replace(chosen, parts=parts)
    if chosen.backend == "spinor":
        options = (("transform", _spinor_transform_of(device, n, dtype, transforms)),)
    elif chosen.backend == "numba":
        options = (("kernel", numba_kernel(batch)),)
    else:
        options = ()
    return replace(chosen, options=options, parts=parts)


def _choose(n, batch, device, dtype, mode, threads, backend, entries, network, network_stage, sandwich,
            exact, autograd, decodes, stages, transforms) -> Plan:
    if sandwich:
        return _decide_sandwich(n, device, dtype, mode, backend)
    cpu = device.type == "cpu"
    small = mode == "inference" and batch <= MATRIX_MAX_INFERENCE_BATCH
    if network:
        if small and dtype in _WORK_DTYPES:
            if cpu and numba_usable() and decodes:
                return Plan(Path.DECODE, None, None,
                            f"network, inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens: the decoding kernel")
            return Plan(Path.STACKED_MATRICES, None, None,
                        f"network, inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens: the stacked matrices"
                        + ("" if decodes else " (the decoding kernel cannot run this network)"))
        if autograd:
            return Plan(Path.STAGES, None, None, "network under autograd: stage by stage", stages=tuple(
                _decide(stage_n, batch, device, dtype, mode, threads, stage_backend, None, False, True,
                        transforms=transforms)
                if structured else Plan(Path.GADGETS, None, None, "stage: each gadget's own call")
                for stage_n, stage_backend, structured in stages))
        return Plan(Path.GADGETS, None, None, "network: gadget by gadget")
    if backend == MATRICES:
        return _matrices(mode, network_stage, "requested")
    if backend != "auto":
        chosen = _backend_plan(backend, _threads(backend, device), "requested", exact)
        return chosen if exact or mode == "inference" else _differentiable_or_factored(chosen, device, dtype)
    if small:
        if (cpu and dtype in _WORK_DTYPES and n >= DECODE_MIN_N
                and (batch <= 1 or (entries or 0) >= DECODE_MIN_ENTRIES) and numba_usable()):
            return Plan(Path.DECODE, None, None,
                        f"inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens, n >= {DECODE_MIN_N}, one token or "
                        f">= {DECODE_MIN_ENTRIES} entries: the decoding kernel")
        return Plan(Path.CACHED_MATRIX, None, None,
                    f"inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens: the cached matrix")
    if network_stage and mode == "training" and n <= NETWORK_BLOCKS_MAX_N:
        return Plan(Path.PARITY_BLOCKS, None, None,
                    f"network stage, training, n <= {NETWORK_BLOCKS_MAX_N}: the parity blocks in one batched product")
    limit = INFERENCE_MATRIX_MAX_N if mode == "inference" else MATRIX_MAX_N
    if n <= limit:
        return _matrices(mode, False, f"{mode}, n <= {limit}: the chunk matrices"
                                      + (" (assembled: the cached matrix)" if mode == "inference" else ""))
    name, why = _rotor_backend(device, dtype)
    chosen = _backend_plan(name, _threads(name, device), f"{mode}, n > {limit}: {why}", exact)
    return chosen if exact or mode == "inference" else _differentiable_or_factored(chosen, device, dtype)


def _decide_sandwich(n: int, device: torch.device, dtype: torch.dtype, mode: str, backend: str) -> Plan:
    """Rules 3 and 4 for a bare rotor_sandwich call, then "factored" for a values-only backend under
    autograd; threads None (a bare call runs with the caller's count)."""
    if backend != "auto":
        chosen = _backend_plan(backend, None, "requested", False)
    else:
        limit = INFERENCE_MATRIX_MAX_N if mode == "inference" else MATRIX_MAX_N
        if n <= limit:
            chosen = _backend_plan(MATRICES, None, f"sandwich, {mode}, n <= {limit}: the chunk matrices", False)
        else:
            name, why = _rotor_backend(device, dtype)
            chosen = _backend_plan(name, None, f"sandwich, {mode}, n > {limit}: {why}", False)
    if mode == "training":
        chosen = _differentiable_or_factored(chosen, device, dtype)
    return Plan(chosen.path, chosen.backend, None, chosen.rule, False)


#: Environment variable read by :func:`transform_setting` (at every :func:`plan` call): "torch"
#: makes the "spinor" backend run torch index operations for its transforms even where numba or
#: Triton ones can take the tensors (one path checked against the other); unset or "auto": the
#: rule of :func:`spinor_transform`.
SPINOR_TRANSFORM_ENV = "GALINEAR_SPINOR_TRANSFORM"
#: The transforms of the "spinor" backend: numba kernels (CPU), Triton kernels (CUDA), torch index operations.
SPINOR_TRANSFORMS = ("numba", "triton", "torch")


def transform_setting() -> str:
    """The user's setting of the spinor transforms, ``GALINEAR_SPINOR_TRANSFORM``: "auto" (unset) or
    "torch"; anything else raises a ValueError. The one place that reads the variable."""
    setting = os.environ.get(SPINOR_TRANSFORM_ENV, "auto")
    if setting not in ("auto", "torch"):
        raise ValueError(f"{SPINOR_TRANSFORM_ENV} must be 'auto' or 'torch', got {setting!r}; unset it for 'auto'")
    return setting


def spinor_transform(*, numba: bool, triton: bool, setting: str | None = None) -> str:
    """Which transforms (multivectors to and from matrices) the "spinor" backend runs: "numba" when
    its kernels can take the tensors (``numba``: CPU tensors, galinear's numba kernels import) and
    :func:`numba_usable`; else "triton" when the Triton transforms can (``triton``: CUDA tensors of
    a size and dtype they support); else "torch" (index operations). ``setting`` "torch"
    (``GALINEAR_SPINOR_TRANSFORM=torch``; None: :func:`transform_setting`) picks "torch" always."""
    if (transform_setting() if setting is None else setting) == "torch":
        return "torch"
    if numba and numba_usable():
        return "numba"
    return "triton" if triton else "torch"


@lru_cache(maxsize=64)
def _spinor_transform_of(device: torch.device, n: int, dtype: torch.dtype, setting: str) -> str:
    """:func:`spinor_transform` for tensors of ``device`` and ``dtype`` holding Cl(n) multivectors:
    the numba kernels for CPU tensors where they import, the Triton ones for CUDA tensors they
    support where triton is installed."""
    if setting == "torch":
        return "torch"
    numba = device.type == "cpu" and _numba_transforms_import()
    triton = device.type == "cuda" and _triton_transforms_serve(n, dtype)
    return spinor_transform(numba=numba, triton=triton, setting=setting)


def _numba_transforms_import() -> bool:
    """Whether galinear's numba transforms import."""
    try:
        import galinear.rotor_kernels.spinor  # noqa: F401
    except Exception:  # numba missing or broken: torch index operations instead
        return False
    return True


def _triton_transforms_serve(n: int, dtype: torch.dtype) -> bool:
    """Whether the Triton transforms import and serve Cl(n) in ``dtype``."""
    try:
        from galinear.nn.functional import spinor_triton
    except Exception:  # triton (or numba, whose tables it shares) missing: torch index operations
        return False
    return spinor_triton.supports(n, dtype)


def spinor_transform_for(device, n: int, dtype: torch.dtype) -> str:
    """The transforms the "spinor" backend runs for a call without a plan (its option
    ``transform="auto"``): :func:`spinor_transform` for such tensors, under the user's setting."""
    return _spinor_transform_of(torch.device(device), n, dtype, transform_setting())


def numba_kernels_usable(x, kernels: str) -> bool:
    """Whether the numba kernels of ``galinear.rotor_kernels.<kernels>`` serve ``x`` (an autograd
    Function's choice between them and torch operations: the Givens layers, a network stage's
    branch sum): a float32/float64 CPU tensor, with numba importable and compiling (under
    NUMBA_DISABLE_JIT the kernels' loops would run as plain Python)."""
    if x.device.type != "cpu" or x.dtype not in _WORK_DTYPES:
        return False
    try:
        import importlib

        importlib.import_module(f"galinear.rotor_kernels.{kernels}")
    except Exception:  # numba missing or broken: the torch operations
        return False
    return numba_usable()


def bivector_parts_method(d: int, device, numba: bool) -> str:
    """How the exact gradient sums the bivector parts of chunks of ``d`` coefficients:
    "correlation" (one batched matrix product per chunk pair) up to ``CORRELATION_LIMIT``
    coefficients, above it "numba" on the CPU when ``numba`` (the tensors are plain float32 or
    float64 ones) and :func:`numba_usable`, else "gather" (one gather-multiply-sum per bivector blade)."""
    if d <= CORRELATION_LIMIT:
        return "correlation"
    return "numba" if numba and torch.device(device).type == "cpu" and numba_usable() else "gather"
