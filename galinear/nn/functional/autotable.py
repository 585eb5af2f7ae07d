"""What ``backend="auto"`` runs for a rotor layer: a measured table, and a rule where it has no entry.

The table (``backend_table.json`` next to this module) is written by
``python benchmarks/bench_backends.py --write``: for every measured key
``"<n>|<batch bucket>|<device type>|<mode>"``, and the same with ``"|<threads>t"`` for the
thread count it ran with (on the CPU a row of the current ``torch.get_num_threads()`` is read
first, then the plain key; mode "training" = forward + backward with the
bivectors requiring gradients (the default exact gradient, which runs the backend's forward map
twice: once on x, once transposed on the output gradient), "inference" = eval-mode forward
without gradients, caches warm) the fastest backend of a whole :class:`~galinear.nn.RotorLinear` call. Batch buckets:
:data:`BATCH_BUCKETS` (a batch goes to the first bucket >= it, or the last).

Rule for a missing key, a backend that is no longer registered, or a dtype it does not support:
``"dense"`` (every chunk-pair matrix in one batched call, then one GEMM; in inference the layer's
assembled matrix is cached) for chunks with n <= :data:`MATRIX_MAX_N`, and in inference also for
batches of at most :data:`MATRIX_MAX_INFERENCE_BATCH` tokens; otherwise the registered backend of
highest priority that supports the device and dtype (``numba`` on the CPU, ``spinor`` on CUDA for
float32/float64, ``factored`` otherwise). With ``gradient="power-step"`` a chosen backend that
computes values only is replaced by ``factored`` wherever autograd runs through the map
(:func:`galinear.nn.functional.rotor_sandwich`).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

__all__ = ["BATCH_BUCKETS", "MATRIX_MAX_N", "TABLE_PATH", "batch_bucket", "choose_backend", "load_table",
           "rule_backend", "table_key"]

#: Batch buckets of the table: 1 token (decoding), up to 32, up to 512, more.
BATCH_BUCKETS = (1, 32, 512, 4096)
#: Largest n for which the rule (not the table) picks the chunk matrices ("dense").
MATRIX_MAX_N = 7
#: In inference, batches up to this size use the cached matrix whatever n (decoding).
MATRIX_MAX_INFERENCE_BATCH = 32
TABLE_PATH = Path(__file__).with_name("backend_table.json")
MODES = ("training", "inference")

_LOADED: dict = {}


def batch_bucket(batch: int) -> int:
    for bucket in BATCH_BUCKETS:
        if batch <= bucket:
            return bucket
    return BATCH_BUCKETS[-1]


def table_key(n: int, batch: int, device, mode: str, threads: int | None = None) -> str:
    """``"<n>|<bucket>|<device type>|<mode>"``, with ``"|<threads>t"`` appended when ``threads``
    is given (rows measured with that many CPU threads)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    key = f"{int(n)}|{batch_bucket(batch)}|{torch.device(device).type}|{mode}"
    return key if threads is None else f"{key}|{int(threads)}t"


def load_table(path=None) -> dict:
    """{key: backend name} from the table file ({} when it does not exist); cached per path."""
    path = Path(path) if path is not None else TABLE_PATH
    key = str(path)
    if key not in _LOADED:
        if not path.exists():
            _LOADED[key] = {}
        else:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as error:
                raise ValueError(f"the backend table {path} cannot be read ({error}); regenerate it with "
                                 "`python benchmarks/bench_backends.py --write` or delete it") from None
            entries = data.get("choices") if isinstance(data, dict) else None
            if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
                raise ValueError(f"the backend table {path} has no 'choices' mapping of keys to backend names; "
                                 "regenerate it with `python benchmarks/bench_backends.py --write`")
            _LOADED[key] = dict(entries)
    return _LOADED[key]


def rule_backend(n: int, batch: int, device, dtype, mode: str) -> str:
    """The documented fallback (see the module docstring)."""
    from galinear.nn.functional.backends import resolve_sandwich_backend

    if n <= MATRIX_MAX_N or (mode == "inference" and batch <= MATRIX_MAX_INFERENCE_BATCH):
        return "dense"
    return resolve_sandwich_backend("auto", device, dtype)[0]


def choose_backend(n: int, batch: int, device, dtype, mode: str, table=None) -> str:
    """The backend for a rotor layer with chunks of 2**n, ``batch`` tokens, on ``device``, in ``mode``.

    ``table`` ({key: name}) replaces the table file (tests); see the module docstring.
    """
    from galinear.nn.functional.backends import _REGISTRY, _load_plugins

    entries = load_table() if table is None else table
    name = None
    if torch.device(device).type == "cpu":  # a row measured with this many threads comes first
        name = entries.get(table_key(n, batch, device, mode, torch.get_num_threads()))
    if name is None:
        name = entries.get(table_key(n, batch, device, mode))
    if name is not None:
        _load_plugins()
        entry = _REGISTRY.get(name)
        if entry is not None and entry.supports(torch.device(device), dtype):
            return name
    return rule_backend(n, batch, device, dtype, mode)
