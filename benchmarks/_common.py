"""What every benchmark shares: one round-robin timer, the machine header, tables and result files.

- :func:`round_robin` times contenders side by side: every round times every contender once, in
  order, so that a change of load during the run falls on all of them alike; each contender gets
  :class:`Timing` statistics (best, median, mean of its samples). A :class:`Contender` adds an
  untimed setup before each sample and a numba thread count around it.
- :class:`BusyProcess` starts one competing process (a pure-Python loop) and kills it on exit.
- :func:`metadata` and :func:`header` record and print how a result was measured: the command,
  the date (UTC), the CPU model and logical CPUs, the library versions and the thread counts.
- :func:`markdown_table` (:func:`markdown_row` for a table printed as it is measured),
  :func:`number` and :func:`ratio` format tables; :func:`write_json`,
  :func:`write_text` and :func:`write_results` write them atomically (``galinear._io``).

The benchmarks import this module as ``_common`` (their own folder is on ``sys.path`` when they
run as scripts; each inserts it for imports from elsewhere).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:  # galinear from this checkout when run without installing it
    sys.path.insert(0, str(ROOT))

__all__ = [
    "ROOT", "RESULTS", "Contender", "Timing", "round_robin", "statistic", "torch_sync", "set_threads", "thread_setting", "BusyProcess",
    "machine", "metadata", "command_line", "header", "markdown_table", "markdown_row", "number", "ratio",
    "write_json", "write_text", "write_results", "dense_cayley",
]


# ------------------------------------------------------------------------------------ timing
@dataclasses.dataclass(frozen=True)
class Contender:
    """One callable to time, with what surrounds each sample.

    ``call``: the timed work. ``setup``: called untimed before each sample (and each warm-up
    call); when given, its result is passed to ``call`` (``call(setup())``), so a forward pass can
    be prepared outside the timed backward. ``threads``: numba's thread count during the sample,
    set and restored outside the timed region (None: left as it is).
    """

    call: Callable
    setup: Callable | None = None
    threads: int | None = None


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call of one contender: one sample per round, each the mean of ``calls`` calls."""

    samples: tuple[float, ...]
    calls: int = 1

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples)


@contextlib.contextmanager
def _numba_threads(count: int | None):
    if count is None:
        yield
        return
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(count), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def _sample(contender: Contender, calls: int, sync, clock) -> float:
    """Seconds of ``calls`` back-to-back calls (setup and thread changes untimed)."""
    state = contender.setup() if contender.setup is not None else None
    args = () if contender.setup is None else (state,)
    with _numba_threads(contender.threads):
        if sync is not None:
            sync()
        start = clock()
        for _ in range(calls):
            contender.call(*args)
        if sync is not None:
            sync()
        return clock() - start


def _calls_per_sample(contender: Contender, seconds: float, sync, clock) -> int:
    """Calls that make a sample last about ``seconds``: 1, 10, 100, ... calls are timed until a
    loop lasts a tenth of it, and the count is scaled from that loop (as timeit's autorange)."""
    calls = 1
    while True:
        elapsed = _sample(contender, calls, sync, clock)
        if elapsed >= seconds / 10 or calls >= 10**6:
            return max(1, int(seconds * calls / max(elapsed, 1e-9)))
        calls *= 10


def round_robin(contenders: Mapping, repeats: int, *, warmup: int = 1, min_sample_seconds: float = 0.0,
                sync: Callable | None = None, clock: Callable[[], float] = time.perf_counter) -> dict:
    """Time ``contenders`` (name -> callable or :class:`Contender`) side by side; name -> :class:`Timing`.

    First ``warmup`` untimed rounds (compilation, caches, lazy tables); then, with
    ``min_sample_seconds``, the number of calls per sample of each contender is chosen so that a
    sample lasts at least that long (a sample of a microsecond call measures the call, not the
    caches another contender left); then ``repeats`` rounds, each timing every contender once in
    the order given. ``sync`` (e.g. :func:`torch_sync`) is called before the clock starts and
    before it stops, inside the timed region. ``clock`` returns seconds (``time.process_time``
    for the CPU seconds of this process).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}; ask for one timed round or more")
    if warmup < 0:
        raise ValueError(f"warmup must be 0 or more rounds, got {warmup}")
    if not contenders:
        raise ValueError("no contenders to time; pass a dict of name -> callable")
    entries = {name: c if isinstance(c, Contender) else Contender(c) for name, c in contenders.items()}
    for _ in range(warmup):
        for entry in entries.values():
            _sample(entry, 1, None, clock)
    calls = {name: _calls_per_sample(entry, min_sample_seconds, sync, clock) if min_sample_seconds > 0 else 1
             for name, entry in entries.items()}
    samples = {name: [] for name in entries}
    for _ in range(repeats):
        for name, entry in entries.items():
            samples[name].append(_sample(entry, calls[name], sync, clock) / calls[name])
    return {name: Timing(tuple(values), calls[name]) for name, values in samples.items()}


def statistic(timings: Mapping, name: str = "median") -> dict:
    """name -> one statistic ("best", "median" or "mean") of :func:`round_robin`'s timings."""
    if name not in ("best", "median", "mean"):
        raise ValueError(f"unknown statistic {name!r}; choose best, median or mean")
    return {key: getattr(timing, name) for key, timing in timings.items()}


def torch_sync(device) -> Callable | None:
    """A hook for :func:`round_robin` that waits for a CUDA device's queued work; None elsewhere."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    return lambda: torch.cuda.synchronize(device)


def thread_setting(text: str):
    """An argparse type for a ``--threads`` value: a count >= 1, or ``auto`` (the thread count of
    every training step chosen by :class:`galinear.optim.threads.ThreadGovernor`)."""
    import argparse

    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a thread count of at least 1 or 'auto', got {text!r}")
    return value


def set_threads(count: int) -> tuple[int, int | None]:
    """torch's and numba's intra-op threads (numba first: starting its pool may reset torch's
    count); returns the counts in effect (numba's is capped by the NUMBA_NUM_THREADS it started
    with; None without numba)."""
    import torch

    numba_count = None
    try:
        from galinear import _numba

        numba_count = _numba.set_threads(count)
    except ImportError:  # numba missing: torch's threads only
        pass
    torch.set_num_threads(count)
    return torch.get_num_threads(), numba_count


class BusyProcess:
    """One other process spinning a pure-Python loop at the priority of this one; killed on exit,
    also on an error. ``cpu`` and ``wall``: its CPU seconds and lifetime, set on exit."""

    SPIN = "while True:\n    pass\n"

    def __enter__(self):
        self.process = subprocess.Popen([sys.executable, "-c", self.SPIN], stdin=subprocess.DEVNULL)
        time.sleep(0.5)  # let it start spinning
        if self.process.poll() is not None:
            raise RuntimeError(f"the busy process exited at once (code {self.process.returncode})")
        self.started = time.perf_counter()
        return self

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds of the busy process so far (Linux), else None."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def __exit__(self, *exc):
        self.cpu = self.cpu_seconds()
        self.wall = time.perf_counter() - self.started
        self.process.kill()
        self.process.wait()
        return False


# ---------------------------------------------------------------------------------- metadata
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict:
    """{"cpu": model name, "logical_cpus": count, "python": version}."""
    return {"cpu": _cpu_model(), "logical_cpus": os.cpu_count(), "python": platform.python_version()}


_PACKAGES = ("numpy", "numba", "torch", "clifford", "kingdon")


def metadata(command: str, packages: Sequence[str] = ("numpy", "numba", "torch"), thread_counts: bool = True,
             **extra) -> dict:
    """How a result was measured: command, date (UTC), machine, the versions of ``packages`` that
    are installed, and (``thread_counts``; off where the thread count varies within the run) the thread
    counts of torch and numba where this process has imported them (reading numba's count may
    start its pool, which can reset torch's: torch's is restored). ``extra`` items are added as given."""
    meta = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine()}
    for package in packages:
        try:
            meta[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    torch = sys.modules.get("torch") if thread_counts else None
    if torch is not None:
        meta["torch_threads"] = torch.get_num_threads()
    if thread_counts and "numba" in sys.modules:
        meta["numba_threads"] = sys.modules["numba"].get_num_threads()
        if torch is not None and torch.get_num_threads() != meta["torch_threads"]:
            torch.set_num_threads(meta["torch_threads"])
    meta.update(extra)
    return meta


def command_line(script: str, argv: Sequence[str] | None = None, make_target: str | None = None) -> str:
    """``python benchmarks/NAME.py ARGS`` (``argv`` None: this process's arguments); with no
    arguments and a ``make_target``: ``make TARGET  (= python benchmarks/NAME.py)``."""
    args = list(sys.argv[1:] if argv is None else argv)
    base = shlex.join(["python", f"benchmarks/{Path(script).name}", *args])
    return f"make {make_target}  (= {base})" if make_target and not args else base


def header(meta: Mapping) -> str:
    """One markdown line from :func:`metadata` (also reads the flat dicts older results hold)."""
    parts = []
    if meta.get("command"):
        parts.append(f"Command: `{str(meta['command']).strip()}`")
    if meta.get("date"):
        parts.append(str(meta["date"]))
    where = meta.get("machine")
    if isinstance(where, Mapping):
        parts.append(f"{where.get('cpu', 'unknown CPU')}, {where.get('logical_cpus', '?')} logical CPUs")
    elif where:
        parts.append(str(where))
    versions = []
    python = where.get("python") if isinstance(where, Mapping) else meta.get("python")
    if python:
        versions.append(f"python {python}")
    for package in _PACKAGES:
        if meta.get(package):
            threads = meta.get(f"{package}_threads")
            versions.append(f"{package} {meta[package]}"
                            + (f" ({threads} thread{'s' if threads != 1 else ''})" if threads else ""))
    if versions:
        parts.append(", ".join(versions))
    return "; ".join(parts) + "."


# ------------------------------------------------------------------------------------ tables
def number(x, digits: int = 3, missing: str = "-") -> str:
    """A time or size with the digits that matter: 1,234 / 12.35 / 0.123 (``digits`` below 1)."""
    if x is None:
        return missing
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.{min(digits, 2)}f}"
    return f"{x:.{digits}f}"


def ratio(x, digits: int = 2, suffix: str = "", bold: bool = False, missing: str = "-") -> str:
    """A ratio such as ``1.25``, ``1.25x`` (``suffix="x"``) or ``**1.25**``; ``missing`` for None."""
    if x is None:
        return missing
    text = f"{x:.{digits}f}{suffix}"
    return f"**{text}**" if bold else text


def _cell(value, spec, missing: str) -> str:
    if value is None:
        return missing
    if callable(spec):
        text = spec(value)
    elif isinstance(value, str):
        text = value
    elif spec is not None:
        text = format(value, spec)
    elif isinstance(value, float):
        text = number(value, missing=missing)
    else:
        text = str(value)
    return text.replace("|", "\\|")  # a bar inside a cell would end it


def markdown_row(cells: Sequence, formats: Sequence | None = None, missing: str = "-") -> str:
    """One row of a markdown table: ``cells`` formatted as :func:`markdown_table` does (``formats``:
    one spec or callable per cell, or None)."""
    cells = list(cells)
    specs = list(formats) if formats is not None else [None] * len(cells)
    if len(specs) != len(cells):
        raise ValueError(f"{len(specs)} formats for {len(cells)} cells; give one per cell")
    return "| " + " | ".join(_cell(v, spec, missing) for v, spec in zip(cells, specs)) + " |"


def markdown_table(columns: Sequence[str], rows, formats=None, missing: str = "-") -> str:
    """A markdown table (no trailing newline). ``rows``: sequences of cells, one per column.
    ``formats``: per column (a sequence, or a dict by column name) a format spec (``".2f"``,
    ``","``) or a callable value -> text; strings are kept, None becomes ``missing``, floats
    without a spec go through :func:`number`; a ``|`` in a column name or a cell is escaped (``\\|``).
    With no rows: the header alone, for a table printed row by row (:func:`markdown_row`)."""
    columns = list(columns)
    if isinstance(formats, Mapping):
        unknown = sorted(set(formats) - set(columns))
        if unknown:
            raise ValueError(f"formats name columns the table lacks: {unknown}; columns are {columns}")
        specs = [formats.get(c) for c in columns]
    else:
        specs = list(formats) if formats is not None else [None] * len(columns)
        if len(specs) != len(columns):
            raise ValueError(f"{len(specs)} formats for {len(columns)} columns; give one per column")
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        row = list(row)
        if len(row) != len(columns):
            raise ValueError(f"a row has {len(row)} cells for {len(columns)} columns: {row!r}")
        lines.append(markdown_row(row, specs, missing))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- files
def write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (its folder created); returns the path."""
    from galinear import _io

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _io.atomic_write_text(path, text)
    return path


def write_json(path, payload, indent: int = 1) -> Path:
    """Write ``payload`` as JSON (with a final newline) to ``path`` atomically; returns the path."""
    return write_text(path, json.dumps(payload, indent=indent) + "\n")


def write_results(stem, payload, markdown: str) -> tuple[Path, Path]:
    """``stem.json`` (``payload``) and ``stem.md`` (``markdown``, ending in a newline), atomically."""
    stem = Path(stem)
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    return (write_json(stem.with_name(stem.name + ".json"), payload),
            write_text(stem.with_name(stem.name + ".md"), text))


# --------------------------------------------------------------------------------- references
def dense_cayley(n: int):
    """The dense (2**n, 2**n, 2**n) Cayley tensor of Euclidean Cl(n): ``einsum("bi,bj,ijk->bk")``
    of it is the geometric product (the reference the product benchmarks time against)."""
    import numpy as np

    from galinear import blades

    index, sign = blades.cayley_tables(n)
    dim = 1 << n
    tensor = np.zeros((dim, dim, dim))
    i, j = np.meshgrid(np.arange(dim), np.arange(dim), indexing="ij")
    tensor[i, j, index] = sign
    return tensor
