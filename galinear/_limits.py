"""Size and argument checks made before long work: refuse at once, naming what a request needs.

Layers check their parameters and index buffers against the memory available on their device
before allocating anything, so that an impossible size is a clear error in microseconds instead
of a raw allocator failure (or minutes of swapping) later.
"""
from __future__ import annotations

import os

__all__ = [
    "TooLargeError", "available_memory", "check_count", "check_max_iter", "check_memory", "check_tolerance",
    "format_bytes", "rotor_linear_size",
]


class TooLargeError(ValueError, MemoryError):
    """A request needs more memory than the device has available (raised before allocating)."""


def format_bytes(nbytes: int) -> str:
    """``17179869184`` -> ``"16.0 GiB (17,179,869,184 bytes)"``."""
    value, unit = float(nbytes), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    if unit == "bytes":
        return f"{int(nbytes):,} bytes"
    return f"{value:.1f} {unit} ({int(nbytes):,} bytes)"


def _host_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def available_memory(device=None) -> int | None:
    """Bytes that can be allocated now on ``device`` (None: torch's default device, else the host).

    Host memory is ``MemAvailable`` of /proc/meminfo (free pages where that is missing); a CUDA
    device reports its free memory. None when unknown (then nothing is refused).
    """
    kind = "cpu"
    if device is not None or _torch_loaded():
        import torch

        if device is None:
            getter = getattr(torch, "get_default_device", None)
            device = getter() if getter is not None else torch.device("cpu")
        device = torch.device(device)
        kind = device.type
        if kind == "cuda":
            try:
                free, _ = torch.cuda.mem_get_info(device)
                return int(free)
            except (RuntimeError, AssertionError, ValueError):
                return None
    if kind == "cpu":
        return _host_available()
    return None  # meta, mps and other devices: no reliable figure


def _torch_loaded() -> bool:
    import sys

    return "torch" in sys.modules


def check_memory(what: str, nbytes: int, device=None, fix: str = "") -> None:
    """Raise :class:`TooLargeError` when ``nbytes`` exceed the memory available on ``device``.

    ``what`` names the request (e.g. ``"RotorLinear(1048576, 1048576, chunk_size=64)"``) and
    ``fix`` says what to change; both appear in the message.
    """
    if nbytes <= 0:
        return
    available = available_memory(device)
    if available is None or nbytes <= available:
        return
    where = "" if device is None else f" on {device}"
    message = (
        f"{what} would need {format_bytes(nbytes)} of memory, but only {format_bytes(available)} "
        f"are available{where}"
    )
    raise TooLargeError(message + (f"; {fix}" if fix else ""))


def check_tolerance(value, name: str = "tol", owner: str = "") -> None:
    """``value`` must be None (the default of the dtype) or a finite real number >= 0."""
    import math
    import numbers

    if value is None:
        return
    prefix = f"{owner}: " if owner else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{prefix}{name} must be a real number >= 0 or None (the dtype's default), got {value!r}")
    if not math.isfinite(float(value)) or value < 0:
        raise ValueError(
            f"{prefix}{name} must be a finite number >= 0 (a stop tolerance; 0 runs every iteration) "
            f"or None for the dtype's default, got {value!r}"
        )


def check_count(value, name: str, minimum: int = 1, owner: str = "") -> int:
    """``value`` as a Python int: any integer type (``int``, ``numpy.int64``, a 0-d integer tensor,
    anything with ``__index__``) >= ``minimum``; bool, floats and strings are refused."""
    import operator

    prefix = f"{owner}: " if owner else ""
    kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    if isinstance(value, bool) or getattr(value, "dtype", None) is not None and str(value.dtype) == "bool":
        raise ValueError(f"{prefix}{name} must be {kind}, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{prefix}{name} must be {kind}, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{prefix}{name} must be {kind}, got {value!r}")
    return number


def check_max_iter(value, name: str = "max_iter", owner: str = "") -> None:
    """``value`` must be an integer >= 1."""
    import numbers

    prefix = f"{owner}: " if owner else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{prefix}{name} must be an integer >= 1 (the most iterations per plane), got {value!r}")


def rotor_linear_size(in_features: int, out_features: int, chunk_size: int, double_rotor=True, alpha=True,
                      bias=False) -> tuple[int, int]:
    """(floating-point values, index bytes) that ``RotorLinear`` allocates, for :func:`check_memory`.

    Values: bivectors P C(n, 2) and warm starts P (n // 2) n per rotor side, P alphas, the bias
    and the output scale; index bytes: the int64 chunk indices and the float64 cover count.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        return 0, 0  # an invalid chunk size is reported by the layer itself
    n = chunk_size.bit_length() - 1
    from galinear._generated.rotor_spec import chunk_layout

    _, inputs, outputs = chunk_layout(in_features, out_features, chunk_size)
    pairs = inputs * outputs
    sides = 2 if double_rotor else 1
    values = pairs * (n * (n - 1) // 2 + (n // 2) * n) * sides + pairs * bool(alpha)
    values += out_features * (1 + bool(bias))
    index_bytes = 8 * ((inputs + outputs) * chunk_size + out_features + max(inputs, outputs))
    return values, index_bytes
