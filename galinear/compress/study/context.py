"""The plain values every step of a study reads: the model, the settings, the store, the captures
cache, the log line writer and whether tqdm bars are shown (:class:`Context`), and the log itself
(:class:`Log`). The orchestrator (:class:`galinear.compress.study.run.Study`) builds them once and
passes them in; nothing here calls back into it.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Context", "Log", "show_bars"]


class Log:
    """One line on stderr with the time since the study started (when ``verbose``), prefixed by the
    rank under torchrun (``rank``: None for a single process). ``echo``, when set, receives every
    message as well (a list's ``append`` collects them)."""

    def __init__(self, verbose: bool, rank: int | None = None):
        self.verbose, self.rank = verbose, rank
        self.t0 = time.perf_counter()
        self.echo: Callable[[str], object] | None = None

    def __call__(self, message: str) -> None:
        if self.echo is not None:
            self.echo(message)
        if self.verbose:
            who = f"rank {self.rank}: " if self.rank is not None else ""
            print(f"[{time.perf_counter() - self.t0:7.1f} s] {who}{message}", file=sys.stderr, flush=True)


def show_bars(progress: bool) -> bool:
    """tqdm bars only on a terminal (``progress`` on and stderr a tty); in a log, one line per unit instead."""
    return bool(progress and sys.stderr.isatty())


@dataclass(frozen=True)
class Context:
    """What the fits of a study share: ``model`` (the original, replacements installed per call),
    ``config`` (a StudyConfig), ``store`` (:class:`galinear.compress.storage.store.Store`),
    ``captures`` (:class:`galinear.compress.study.captures.Captures`), ``log`` (a callable taking one
    line) and ``bars`` (whether fits show tqdm bars)."""

    model: Any
    config: Any
    store: Any
    captures: Any
    log: Callable[[str], None]
    bars: bool

    def label(self, text: str) -> str | None:
        """``text`` as the label of a progress bar when bars are shown, else None (silent)."""
        return text if self.bars else None
