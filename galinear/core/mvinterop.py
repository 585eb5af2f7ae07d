"""Conversions of :class:`~galinear.core.algebra.MultiVector` values to and from clifford and
kingdon objects, and their text and LaTeX forms.

The functions here take a :class:`~galinear.core.layout.Layout` and return arrays or signatures;
``MultiVector.from_clifford`` and ``MultiVector.from_kingdon`` build the Algebra of an inferred
signature."""
from __future__ import annotations

import numpy as np

from galinear import blades
from galinear.core.layout import Layout

__all__ = ["clifford_signature", "kingdon_signature", "to_kingdon", "from_kingdon", "format_row",
           "InteropMethods"]


def clifford_signature(mv) -> tuple[int, int, int]:
    """(p, q, r) of the algebra of a ``clifford.MultiVector`` or MVArray (read from its layout);
    ValueError when galinear's ``Algebra(p, q, r)`` orders its basis differently."""
    import clifford

    first = mv if isinstance(mv, clifford.MultiVector) else np.asarray(mv, dtype=object).reshape(-1)[0]
    return _signature_of_metric(tuple(int(s) for s in first.layout.sig), "clifford")


def kingdon_signature(x) -> tuple[int, int, int]:
    """(p, q, r) of the algebra of a kingdon multivector (its blades are permuted to galinear's
    order, so any order of kingdon's basis is accepted)."""
    ksig = tuple(int(s) for s in np.asarray(x.algebra.signature))
    return ksig.count(1), ksig.count(-1), ksig.count(0)


def to_kingdon(alg: Layout, values: np.ndarray, kingdon_algebra=None, pattern: int | None = None):
    """A kingdon multivector of ``values`` (batch axes last, as kingdon stores them), holding
    only the blades of the grade pattern when one is given."""
    kalg = kingdon_algebra if kingdon_algebra is not None else _kingdon_algebra(alg)
    if sorted(np.asarray(kalg.signature).tolist()) != sorted(alg.metric):
        raise ValueError(
            f"the kingdon algebra has signature {list(kalg.signature)}, this one {list(alg.metric)}"
        )
    keys, signs = _blade_map(alg.metric, tuple(int(s) for s in np.asarray(kalg.signature)))
    keys, signs = keys[alg.bitmasks], signs[alg.bitmasks]
    values = np.moveaxis(np.asarray(values, dtype=np.float64) * signs, -1, 0)
    if pattern is not None:
        keep = ((pattern >> alg.grades) & 1).astype(bool)
        keys, values = keys[keep], values[keep]
    return kalg.multivector(values=values, keys=tuple(int(k) for k in keys))


def from_kingdon(x, algebra: Layout) -> np.ndarray:
    """Coefficients (..., 2**n) in ``algebra`` of a kingdon multivector (any subset of blades,
    batched or not)."""
    ksig = tuple(int(s) for s in np.asarray(x.algebra.signature))
    if sorted(ksig) != sorted(algebra.metric):
        raise ValueError(f"the kingdon multivector has signature {list(ksig)}, {algebra!r} has {list(algebra.metric)}")
    targets, signs = _blade_map(ksig, algebra.metric)  # indexed by kingdon bitmask (order of ksig)
    keys = list(x.keys())
    vals = np.asarray(x.values(), dtype=np.float64)
    if vals.ndim == 0 or vals.shape[0] != len(keys):
        vals = np.reshape(vals, (len(keys),) + vals.shape[1:] if vals.ndim else (len(keys),))
    out = np.zeros(vals.shape[1:] + (algebra.dim,), dtype=np.float64)
    pos = algebra.shortlex_index
    for key, v in zip(keys, vals):
        out[..., int(pos[int(targets[int(key)])])] = signs[int(key)] * v
    return out


def _format_coefficient(alg: Layout, name: str, mask: int, c, latex: bool, precision: int):
    text = f"{float(c):.{precision}g}"
    if mask == 0:
        return text
    if latex:
        idx = ",".join(str(i + 1) for i in range(alg.n) if mask >> i & 1) if alg.n >= 10 else name[1:]
        blade = rf"e_{{{idx}}}"
        return blade if text == "1" else ("-" + blade if text == "-1" else rf"{text}\,{blade}")
    return name if text == "1" else ("-" + name if text == "-1" else f"{text}*{name}")


def format_row(alg: Layout, row, latex: bool = False, precision: int = 6) -> str:
    r"""``1 + 2*e12`` (or LaTeX ``1 + 2\,e_{12}``) for one row of coefficients."""
    parts = [_format_coefficient(alg, name, int(mask), c, latex, precision)
             for name, mask, c in zip(alg.blade_names, alg.bitmasks, row) if c != 0]
    if not parts:
        return "0"
    out = parts[0]
    for part in parts[1:]:
        out += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
    return out


def _signature_of_metric(metric: tuple[int, ...], source: str) -> tuple[int, int, int]:
    r, p, q = metric.count(0), metric.count(1), metric.count(-1)
    ours = blades.metric_from_signature(p, q, r)
    if ours != metric:
        raise ValueError(
            f"the {source} algebra orders its basis as {metric}; galinear's Algebra({p}, {q}, {r}) "
            f"uses {ours} (null vectors first, then +1, then -1). Pass algebra=... with "
            f"a matching order, or reorder the {source} basis"
        )
    return p, q, r


def _blade_map(src: tuple[int, ...], dst: tuple[int, ...]):
    """Map blades between two orders of the same basis vectors (same squares, order kept per square).

    Returns (dst bitmask, sign), both indexed by the src bitmask: src blade m equals
    ``sign[m]`` times dst blade ``target[m]``.
    """
    n = len(src)
    perm = [0] * n  # src vector i -> dst vector perm[i]
    for value in (0, 1, -1):
        for i, j in zip([i for i in range(n) if src[i] == value], [j for j in range(n) if dst[j] == value]):
            perm[i] = j
    masks = range(1 << n)
    targets = np.zeros(1 << n, dtype=np.int64)
    signs = np.ones(1 << n)
    for m in masks:
        image = [perm[i] for i in range(n) if m >> i & 1]
        inversions = sum(1 for a in range(len(image)) for b in range(a + 1, len(image)) if image[a] > image[b])
        targets[m] = sum(1 << j for j in image)
        signs[m] = -1.0 if inversions % 2 else 1.0
    return targets, signs


_KINGDON: dict = {}


def _kingdon_algebra(alg: Layout):
    try:
        import kingdon
    except ImportError:
        raise ImportError("to_kingdon() needs the kingdon package: pip install kingdon") from None
    if alg.metric not in _KINGDON:
        p, q, r = alg.signature
        _KINGDON[alg.metric] = kingdon.Algebra(p, q, r)
    return _KINGDON[alg.metric]


class InteropMethods:
    """Conversions and printing of MultiVector (a base class of it); ``from_clifford`` and
    ``from_kingdon`` are MultiVector's own, as they build an Algebra."""

    __slots__ = ()

    # ---------------------------------------------------------------- interop
    def to_clifford(self):
        """A ``clifford.MultiVector`` (unbatched) or ``clifford.MVArray`` (batched)."""
        return self.algebra.to_clifford(self.values)

    def to_kingdon(self, kingdon_algebra=None):
        """A kingdon multivector (batch axes last, as kingdon stores them) with the blades of the
        known grades (all blades when not tracked); needs kingdon installed."""
        return to_kingdon(self.algebra, self.values, kingdon_algebra, self._pattern)

    # ---------------------------------------------------------------- printing
    def _rows_text(self, latex: bool, first: int = 4):
        flat = self.values.reshape(-1, self.algebra.dim)
        return [format_row(self.algebra, r, latex) for r in flat[:first]], flat.shape[0]

    def __str__(self):
        if self.values.ndim == 1:
            return format_row(self.algebra, self.values)
        rows, total = self._rows_text(False)
        more = f", ... ({total} in all)" if total > 4 else ""
        return "[" + ", ".join(rows) + more + "]"

    def __repr__(self):
        dtype = "" if self.values.dtype == np.float64 else f", dtype={self.values.dtype}"
        if self.values.ndim == 1:
            return f"MultiVector({self.algebra!r}, {self}{dtype})"
        return f"MultiVector({self.algebra!r}, shape={self.shape}, grades={self.grades()}{dtype}: {self})"

    def latex(self) -> str:
        r"""LaTeX source, e.g. ``1 + 2\,e_{12}``; batched values give a comma-separated list."""
        if self.values.ndim == 1:
            return format_row(self.algebra, self.values, latex=True)
        rows, total = self._rows_text(True)
        more = r",\ \dots" if total > 4 else ""
        return r"\left[" + r",\ ".join(rows) + more + r"\right]"

    def _repr_latex_(self):
        return f"${self.latex()}$"
