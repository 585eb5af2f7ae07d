r"""The one dispatcher of the rotor layers: which backend a call runs, whether it decodes, and with
how many threads.

:class:`~galinear.nn.RotorLinear` and :class:`~galinear.nn.RotorNetwork` ask :func:`plan` at every
call and do what the returned :class:`Plan` says; they choose nothing themselves. The thresholds
are the constants of :mod:`galinear._switch_points` (one place, each with the benchmark that
measured it; the numba kernels read one of them there too). They are stated in the rotor
specification's documentation and in docs/performance.md ("Which backend a rotor layer runs") too.

A :class:`~galinear.nn.RotorLinear` call with ``backend="auto"`` (mode "inference": no autograd
and no warm-start update; "training" otherwise) runs what the first rule that applies says:

1. captured or transformed (torch.compile, jit.trace, export, a torch.func transform):
   ``"dense"``, plain torch operations, threads as the caller set them;
2. inference on at most ``MATRIX_MAX_INFERENCE_BATCH`` (32) tokens: on the CPU the compiled
   decoding kernel when numba compiles, the chunks have n >= ``DECODE_MIN_N`` (9) and the batch is
   one token or the (out, in) matrix has at least ``DECODE_MIN_ENTRIES`` (2048 x 2048) entries;
   otherwise the cached (out, in) matrix (``"dense"``);
3. chunks of n <= ``MATRIX_MAX_N`` (7) in training, n <= ``INFERENCE_MATRIX_MAX_N`` (9) in
   inference: the chunk matrices (``"dense"``);
4. on the CPU and on CUDA ``"spinor"``, in inference and in training at any thread count
   (``python benchmarks/bench_contention.py [--training]``: the fastest backend in every cell,
   idle and beside a busy process; until its token blocks went to the caller's threads, training
   with more than one thread ran ``"numba"``); where these do not apply (other devices or
   dtypes, a backend missing from the registry) the registry's best for the device and dtype
   (the supporting backend of highest priority; "numba" ranks below "factored", so it runs only
   where it is named). :func:`auto_backend` is this rule alone, and it is what
   :func:`~galinear.nn.functional.resolve_sandwich_backend` means by ``"auto"``.

A bare :func:`~galinear.nn.functional.rotor_sandwich` call (``sandwich=True``; mode "training"
when autograd runs through it) follows rules 1, 3 and 4 (it has no cached matrix and no decoding
kernel), and then one more: under autograd a backend that computes values only (registered
without ``differentiable=True``, e.g. "spinor" and "numba", named or chosen) is replaced by
``"factored"``, the same map in differentiable torch operations. A bare call keeps the caller's
thread count (its plan's ``threads`` is None; ``python benchmarks/bench_contention.py``, row
"spinor map, caller's threads", times it).

A stage of a :class:`~galinear.nn.RotorNetwork` in training (its gadgets on one input,
``network_stage=True``) with ``backend="auto"`` and chunks of n <= ``NETWORK_BLOCKS_MAX_N`` (10)
runs ``"dense"``: the parity blocks of all its chunk pairs in one batched product.

A named backend runs as named (rule "requested"). A :class:`~galinear.nn.RotorNetwork`
(``network=True``) runs the whole network in one call in inference on at most
``MATRIX_MAX_INFERENCE_BATCH`` tokens in float32 or float64: the decoding kernel on the CPU when
numba compiles, the stacked matrices (``"dense"``) otherwise; in every other case ``"gadgets"``:
each gadget plans its own call.

Threads, one policy for torch's intra-op pool (OpenMP, and MKL through it) and numba's parallel
loops: on the CPU a backend of ``SERIAL_BACKENDS`` ("spinor", "factored") runs its call with one
intra-op thread. Such a backend is many small parallel operations, each ending at a barrier of the
pool; with one other busy process on the machine every barrier costs a scheduler quantum, and two
threads became 22x slower than one. "spinor" still uses the caller's cores: its token blocks are
shared among as many Python threads as the caller had, each block computed serially
(:func:`galinear.nn.functional.threads.for_each_block`), so no thread waits for another. The other
paths keep the caller's count: "dense" is one GEMM per call (a handful in training), "numba" one
parallel region, and the decoding kernels are serial. :class:`intra_op_threads` (from
:mod:`galinear.nn.functional.threads`) applies the count for the call, records the caller's, and
restores the previous counts on exit, also when the call raises. The backward pass of the exact
gradient (:class:`galinear.nn.dexp.RotorMap`), which autograd runs after the call has returned,
applies the same counts the same way; its bivector parts (one batched product or one parallel
loop) run with the caller's count (``gradient="power-step"`` differentiates the torch operations
of ``"factored"``, whose backward pass autograd runs with the caller's count).

Plans are remembered per argument tuple, so that asking costs a few microseconds per call;
:func:`forget_plans` drops them (after registering a backend, say).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

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
from galinear.nn.functional._common import _capturing
from galinear.nn.functional import backends
from galinear.nn.functional.threads import intra_op_threads

__all__ = ["MODES", "Plan", "SPINOR_TRANSFORM_ENV", "auto_backend", "bivector_parts_method", "forget_plans",
           "intra_op_threads", "numba_usable", "plan", "spinor_transform"]

#: What a call does: "training" (autograd or a warm-start update) or "inference".
MODES = ("training", "inference")
_WORK_DTYPES = (torch.float32, torch.float64)


@dataclass(frozen=True)
class Plan:
    """What one call of a rotor layer runs.

    backend : sandwich backend name ("dense": the chunk matrices, or the cached (out, in) matrix
        in inference); for a RotorNetwork "dense" (the whole network in one call) or "gadgets".
    decode : run the compiled decoding kernel instead (CPU, inference, few tokens).
    threads : intra-op threads to run the call with (1 for the backends of ``SERIAL_BACKENDS`` on
        the CPU); None: as the caller set them.
    rule : which rule chose it, in words.
    """

    backend: str
    decode: bool
    threads: int | None
    rule: str


def numba_usable() -> bool:
    """Whether numba imports and compiles (under NUMBA_DISABLE_JIT its loops would be plain Python,
    and the plans that run a compiled kernel take their torch path instead)."""
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a dependency
        return False
    return not config.DISABLE_JIT


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


def _differentiable_or_factored(chosen: Plan, device: torch.device, dtype: torch.dtype) -> Plan:
    """Under autograd a bare sandwich runs a backend registered ``differentiable``, else "factored"."""
    try:
        entry = backends.sandwich_backend_entry(chosen.backend)
    except ValueError:
        return chosen  # an unknown name: resolving it reports the error
    if entry.differentiable or not entry.supports(device, dtype):
        return chosen  # differentiable, or resolving it reports what it does not support
    return Plan("factored", False, _threads("factored", device),
                f"{chosen.rule}; {chosen.backend} computes values only: factored under autograd")


def plan(n: int, batch: int, device, dtype: torch.dtype, mode: str, threads: int | None = None, *,
         backend: str = "auto", entries: int | None = None, network: bool = False,
         network_stage: bool = False, sandwich: bool = False) -> Plan:
    """The :class:`Plan` of one call (rules in the module docstring).

    Parameters
    ----------
    n : chunks of 2**n coefficients.
    batch : tokens of the call.
    device, dtype : of the computation (the layer's parameters).
    mode : "training" (autograd or a warm-start update) or "inference".
    threads : the caller's intra-op thread count (default ``torch.get_num_threads()``).
    backend : the layer's backend setting ("auto" or a registered name).
    entries : out_features x in_features of the layer (for the decoding rule).
    network : plan a whole RotorNetwork call instead of one gadget.
    network_stage : plan one stage of a RotorNetwork (its gadgets on one input) instead of one gadget.
    sandwich : plan a bare :func:`~galinear.nn.functional.rotor_sandwich` call (mode "training":
        autograd runs through it).

    Plans are remembered per argument tuple (a call of a layer asks at every forward); after
    registering a backend or changing what numba can do, :func:`forget_plans` drops them.
    """
    if _capturing():
        if network:
            return _CAPTURED_NETWORK
        chosen = _CAPTURED if backend == "auto" else Plan(backend, False, None, "requested")
        if sandwich and mode == "training":
            chosen = _differentiable_or_factored(chosen, torch.device(device), dtype)
            return Plan(chosen.backend, False, None, chosen.rule)
        return chosen
    if threads is None:
        threads = torch.get_num_threads()
    return _decide(n, batch, device, dtype, mode, threads, backend, entries, network, network_stage, sandwich)


def forget_plans() -> None:
    """Drop the remembered plans (see :func:`plan`)."""
    _decide.cache_clear()


backends._ON_CHANGE.append(forget_plans)


_CAPTURED = Plan("dense", False, None, "captured: plain torch operations")
_CAPTURED_NETWORK = Plan("gadgets", False, None, "captured: gadget by gadget")


@lru_cache(maxsize=1024)
def _decide(n, batch, device, dtype, mode, threads, backend, entries, network, network_stage=False,
            sandwich=False) -> Plan:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    device = torch.device(device)
    if sandwich:
        return _decide_sandwich(n, device, dtype, mode, backend)
    cpu = device.type == "cpu"
    small = mode == "inference" and batch <= MATRIX_MAX_INFERENCE_BATCH
    if network:
        if small and dtype in _WORK_DTYPES:
            if cpu and numba_usable():
                return Plan("dense", True, None,
                            f"network, inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens: the decoding kernel")
            return Plan("dense", False, None,
                        f"network, inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens: the stacked matrices")
        return Plan("gadgets", False, None, "network: gadget by gadget")
    if backend != "auto":
        return Plan(backend, False, _threads(backend, device), "requested")
    if small:
        if (cpu and dtype in _WORK_DTYPES and n >= DECODE_MIN_N
                and (batch <= 1 or (entries or 0) >= DECODE_MIN_ENTRIES) and numba_usable()):
            return Plan("dense", True, None,
                        f"inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens, n >= {DECODE_MIN_N}, one token or "
                        f">= {DECODE_MIN_ENTRIES} entries: the decoding kernel")
        return Plan("dense", False, None,
                    f"inference on <= {MATRIX_MAX_INFERENCE_BATCH} tokens: the cached matrix")
    if network_stage and mode == "training" and n <= NETWORK_BLOCKS_MAX_N:
        return Plan("dense", False, None,
                    f"network stage, training, n <= {NETWORK_BLOCKS_MAX_N}: the parity blocks in one batched product")
    limit = INFERENCE_MATRIX_MAX_N if mode == "inference" else MATRIX_MAX_N
    if n <= limit:
        return Plan("dense", False, None, f"{mode}, n <= {limit}: the chunk matrices")
    name, why = _rotor_backend(device, dtype)
    return Plan(name, False, _threads(name, device), f"{mode}, n > {limit}: {why}")


def _decide_sandwich(n: int, device: torch.device, dtype: torch.dtype, mode: str, backend: str) -> Plan:
    """Rules 3 and 4 for a bare rotor_sandwich call, then "factored" for a values-only backend under
    autograd; threads None (a bare call runs with the caller's count)."""
    if backend != "auto":
        chosen = Plan(backend, False, None, "requested")
    else:
        limit = INFERENCE_MATRIX_MAX_N if mode == "inference" else MATRIX_MAX_N
        if n <= limit:
            chosen = Plan("dense", False, None, f"sandwich, {mode}, n <= {limit}: the chunk matrices")
        else:
            name, why = _rotor_backend(device, dtype)
            chosen = Plan(name, False, None, f"sandwich, {mode}, n > {limit}: {why}")
    if mode == "training":
        chosen = _differentiable_or_factored(chosen, device, dtype)
    return Plan(chosen.backend, False, None, chosen.rule)


#: Environment variable read by :func:`spinor_transform`: "torch" makes the "spinor" backend run
#: torch index operations for its transforms even where numba or Triton ones can take the tensors
#: (one path checked against the other); unset or "auto": the rule below.
SPINOR_TRANSFORM_ENV = "GALINEAR_SPINOR_TRANSFORM"


def spinor_transform(*, numba: bool, triton: bool) -> str:
    """Which transforms (multivectors to and from matrices) the "spinor" backend runs: "numba" when
    its kernels can take the tensors (``numba``: CPU tensors, galinear's numba kernels import) and
    :func:`numba_usable`; else "triton" when the Triton transforms can (``triton``: CUDA tensors of
    a size and dtype they support); else "torch" (index operations). ``GALINEAR_SPINOR_TRANSFORM=torch``
    picks "torch" always."""
    setting = os.environ.get(SPINOR_TRANSFORM_ENV, "auto")
    if setting not in ("auto", "torch"):
        raise ValueError(f"{SPINOR_TRANSFORM_ENV} must be 'auto' or 'torch', got {setting!r}; unset it for 'auto'")
    if setting == "torch":
        return "torch"
    if numba and numba_usable():
        return "numba"
    return "triton" if triton else "torch"


def bivector_parts_method(d: int, device, numba: bool) -> str:
    """How the exact gradient sums the bivector parts of chunks of ``d`` coefficients:
    "correlation" (one batched matrix product per chunk pair) up to ``CORRELATION_LIMIT``
    coefficients, above it "numba" on the CPU when ``numba`` (the tensors are plain float32 or
    float64 ones) and :func:`numba_usable`, else "gather" (one gather-multiply-sum per bivector blade)."""
    if d <= CORRELATION_LIMIT:
        return "correlation"
    return "numba" if numba and torch.device(device).type == "cpu" and numba_usable() else "gather"
