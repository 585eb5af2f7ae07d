"""Whole-model compression: layer sets written as ``all`` or ranges, and the per-layer bookkeeping of a
sequential run (progress with an estimated time left).

A layer set is fitted in increasing layer order: layer L is fitted on the activations of the
network whose earlier layers of the set are already replaced (:func:`galinear.compress.study.layers.fit_layer_set`),
with the chosen objective. Every fitted layer is checkpointed atomically (one file per
projection) before the next starts, so a rerun resumes at the first layer without its files and
gives the same replacements, bit for bit. ``--layers all`` is the set of every decoder layer,
``0-29`` a range, and the two mix with plain indices: ``0-3,8`` or ``4;15;all``.
"""
from __future__ import annotations

import re
import time

ALL = "all"
#: Layer indices above this are refused while --layers is read, before a range is expanded (no model
#: has that many decoder layers; the model's own count is checked as soon as it is known).
MAX_LAYER_INDEX = 9_999


def _bounded(index: int, text: str) -> int:
    if index > MAX_LAYER_INDEX:
        raise ValueError(f"layer index {index:,} in --layers {text!r} is beyond any model: indices stop at "
                         f"{MAX_LAYER_INDEX:,} (and at the model's layer count less one); give layers the model has, "
                         "or 'all'")
    return index


def _layer_item(item: str, text: str) -> tuple:
    item = item.strip()
    if item.lower() == ALL:
        return (ALL,)
    match = re.fullmatch(r"(\d+)\s*-\s*(\d+)", item)
    if match:
        lo, hi = int(match.group(1)), int(match.group(2))
        for end in (lo, hi):  # before the range is built
            _bounded(end, text)
        if lo > hi:
            raise ValueError(f"the range {item!r} in --layers {text!r} runs backwards; write it as FIRST-LAST with "
                             f"FIRST <= LAST, e.g. {hi}-{lo}")
        return tuple(range(lo, hi + 1))
    try:
        index = int(item)
    except ValueError:
        raise ValueError(f"{item!r} in --layers {text!r} is not a layer index, a range FIRST-LAST (0-29) or "
                         "'all'") from None
    return (index if index < 0 else _bounded(index, text),)


def parse_layer_sets(text: str) -> tuple:
    """'4;15;15,16' -> ((4,), (15,), (15, 16)); '0-3,8' -> ((0, 1, 2, 3, 8),); 'all' -> (('all',),).

    Sets are separated by ';', layers inside a set by ','; a range FIRST-LAST includes both ends;
    ``all`` stands for every decoder layer and is expanded once the layer count is known
    (:func:`expand_layer_sets`).
    """
    sets = []
    for part in str(text).split(";"):
        if not part.strip():
            continue
        items = [x for x in part.split(",") if x.strip()]
        layers = tuple(v for item in items for v in _layer_item(item, text))
        if ALL in layers and len(layers) > 1:
            raise ValueError(f"'all' in --layers {text!r} already holds every layer; give it as a set of its own "
                             "(e.g. '15;all')")
        sets.append(layers)
    if not sets:
        raise ValueError(f"no layer set in {text!r}; examples: --layers '4;15;15,16', --layers 0-29, --layers all")
    return tuple(sets)


def expand_layer_sets(layer_sets, count: int) -> tuple:
    """Replace each ``('all',)`` set by ``(0, 1, ..., count-1)``; other sets are kept as they are.

    A set that 'all' makes the same as another one ('all;0-2' on a model of 3 layers) is refused: it
    would fit and report the same layers twice."""
    expanded = tuple(tuple(range(count)) if tuple(s) == (ALL,) else tuple(s) for s in layer_sets)
    if has_all(layer_sets) and len(set(expanded)) < len(expanded):
        given = [s for s in layer_sets if tuple(s) != (ALL,) and tuple(s) == tuple(range(count))]
        raise ValueError(f"--layers gives the set {compact(given[0]) if given else ALL} and 'all', which on this model "
                         f"of {count} decoder layers are the same layers ({compact(range(count))}); give it once")
    return expanded


def compact(layers) -> str:
    """(0, 1, ..., 29) -> '0-29', (0, 2) -> '0,2', (0, 1, 2, 5) -> '0-2,5': runs of three or more as ranges."""
    layers, parts, i = list(layers), [], 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] == layers[j] + 1:
            j += 1
        parts += [f"{layers[i]}-{layers[j]}"] if j - i >= 2 else [str(x) for x in layers[i:j + 1]]
        i = j + 1
    return ",".join(parts)


def has_all(layer_sets) -> bool:
    return any(ALL in tuple(s) for s in layer_sets)


class LayerProgress:
    """One line per layer of a layer set: which layer, how long it took and the time left.

    The estimate is the mean time of the layers fitted in this run (layers loaded from their
    checkpoints do not count) times the layers still to do.
    """

    def __init__(self, label: str, layers, log, enabled: bool = True):
        self.label, self.layers, self.log, self.enabled = label, tuple(layers), log, enabled
        self.fitted_seconds, self.fitted = 0.0, 0
        self.t0 = time.perf_counter()

    @classmethod
    def of_run(cls, tag: str, seed: int, layer_set, log) -> LayerProgress:
        """The lines of one (method ``tag``, seed, layer set) run: on for a set of several layers."""
        return cls(f"{tag} s{seed} layers {compact(layer_set)}", layer_set, log, enabled=len(layer_set) > 1)

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def done(self, index: int, loaded: bool) -> str:
        """Layer ``layers[index]`` is in place (``loaded``: from its checkpoints); returns the line logged."""
        seconds = time.perf_counter() - self.t0
        left = len(self.layers) - index - 1
        if not loaded:
            self.fitted_seconds += seconds
            self.fitted += 1
        if self.fitted:
            eta = format_seconds(self.fitted_seconds / self.fitted * left)
        else:
            eta = "?" if left else "0 s"
        line = (f"{self.label}: layer {self.layers[index]} ({index + 1}/{len(self.layers)}) "
                + ("loaded from its checkpoints" if loaded else f"fitted in {seconds:.1f} s")
                + f"; {left} layer{'s' if left != 1 else ''} left, about {eta}")
        if self.enabled:
            self.log(line)
        self.t0 = time.perf_counter()
        return line


def format_seconds(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


__all__ = ["ALL", "parse_layer_sets", "expand_layer_sets", "compact", "has_all", "LayerProgress", "format_seconds"]
