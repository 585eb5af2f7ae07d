"""Progress of a unit of work (a fit, a capture, an evaluation): a bar on a terminal, lines in a log."""
from __future__ import annotations

import sys
import time


class Progress:
    """Progress of one unit of ``total`` steps labelled ``label`` (None: silent).

    On a terminal (``stream.isatty()``) a tqdm bar that is cleared at the end. Otherwise, for a
    log: no bar and no carriage return, one line when the unit ends with its elapsed time, and a
    line at most every ``every`` seconds while it runs (long units).
    """

    def __init__(self, total: int, label: str | None, stream=None, every: float = 60.0):
        self.total, self.label, self.every = int(total), label, every
        self.stream = sys.stderr if stream is None else stream
        self.t0 = self.last = time.perf_counter()
        self.bar = None
        if label is not None and _isatty(self.stream):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc=label, leave=False, file=self.stream)

    def _line(self, text: str) -> None:
        print(f"{self.label}: {text} ({time.perf_counter() - self.t0:.1f} s)", file=self.stream, flush=True)

    def step(self, n: int, note: str | None = None) -> None:
        """Unit ``n`` of ``total`` is done; ``note`` is shown beside it."""
        if self.label is None:
            return
        if self.bar is not None:
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n - self.bar.n)
        elif time.perf_counter() - self.last >= self.every:
            self.last = time.perf_counter()
            self._line(f"{n}/{self.total}" + (f", {note}" if note else ""))

    def close(self, summary: str | None = None) -> None:
        if self.label is None:
            return
        if self.bar is not None:
            self.bar.close()
        else:
            self._line(summary or f"{self.total} done")


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_steps(total: int, label: str | None, stream=None) -> Progress:
    """A :class:`Progress` for ``total`` steps (see there)."""
    return Progress(total, label, stream)


__all__ = ["Progress", "progress_steps"]
