"""Hostile and damaged files for tests of galinear's loaders: a pickle that runs code when it is
unpickled (it creates a marker file, so a test can see whether it ran) and a file cut short.

A loader passes when the marker is never written and the error (or the recomputation) names the
file. :func:`write_payload` imports torch.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

__all__ = ["CodePayload", "write_payload", "truncate_file"]


class CodePayload:
    """Unpickling this object creates the empty file ``marker``: a stand-in for any code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def write_payload(path, marker, kind: str = "torch") -> None:
    """Write to ``path`` a dictionary shaped like a checkpoint (a tensor, a history, a format
    string) whose unpickling creates ``marker``. ``kind``: ``"torch"`` for a ``torch.save`` zip,
    ``"pickle"`` for a raw pickle (protocol 2) of the same dictionary. Missing parent folders
    are created."""
    if kind not in ("torch", "pickle"):
        raise ValueError(f"kind must be 'torch' or 'pickle', got {kind!r}")
    import torch

    evil = {"model": {"weight": torch.zeros(2)}, "history": CodePayload(marker), "format": "galinear-compressed-v1"}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if kind == "torch":
        torch.save(evil, path)
    else:
        with open(path, "wb") as handle:
            pickle.dump(evil, handle, protocol=2)


def truncate_file(path, keep: float = 0.5) -> None:
    """Cut the file at ``path`` to the first ``keep`` fraction of its bytes (0 <= keep <= 1)."""
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"keep must be a fraction in [0, 1], got {keep!r}")
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:int(len(data) * keep)])
