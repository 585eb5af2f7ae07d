"""Checking a compiled kernel against independent evaluations of the same function.

References, row by row on random inputs:

- ``galinear``: the user's function evaluated with the numeric :class:`galinear.MultiVector`
  (table-driven products, the numeric exp and inverse: no generated code);
- ``clifford``: the same function over the ``clifford`` package's multivectors, through a thin
  adapter that gives them galinear's operator meanings (``<<`` left contraction, ``|`` the inner
  product with scalars, ``@`` the sandwich; exp by scaling and squaring of the series). Steps the
  adapter does not offer (the Hodge dual of a degenerate metric) skip this reference, and
  the report says so.

Tolerances, on the largest error of a row relative to ``max(1, |reference|)``:
float64 1e-9 and float32 2e-4 (both far above the roundoff of these short programs and far
below any wrong sign or blade).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["VerifyReport", "verify_kernel", "TOLERANCE", "random_inputs", "evaluate_numeric",
           "evaluate_clifford"]

TOLERANCE = {"float64": 1e-9, "float32": 2e-4}


@dataclass
class VerifyReport:
    """Per (reference, dtype): the largest scaled error, the tolerance and the verdict."""

    kernel: str
    rows: list = field(default_factory=list)  # (reference, dtype, error, tolerance, ok, note)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r[4] for r in self.rows if r[4] is not None)

    def __bool__(self):
        return self.ok

    def table(self) -> str:
        lines = [f"verify {self.kernel}", f"{'reference':<10} {'dtype':<8} {'max error':>10} {'tolerance':>10}  result"]
        for ref, dtype, err, tol, ok, note in self.rows:
            if ok is None:
                lines.append(f"{ref:<10} {dtype:<8} {'-':>10} {'-':>10}  skipped: {note}")
            else:
                lines.append(f"{ref:<10} {dtype:<8} {err:>10.2e} {tol:>10.0e}  {'ok' if ok else 'FAIL'}"
                             + (f" ({note})" if note else ""))
        return "\n".join(lines)

    __str__ = table


def random_inputs(kernel, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard normal coefficients, shape (n, k) per input (float64)."""
    return [rng.standard_normal((n, len(b))) for b in kernel.input_blades.values()]


def _to_full(alg, blades_, values) -> np.ndarray:
    idx = [alg.blade_names.index(b) for b in blades_]
    full = np.zeros(values.shape[:-1] + (alg.dim,))
    full[..., idx] = values
    return full


def _from_full(alg, blades_, full) -> np.ndarray:
    idx = [alg.blade_names.index(b) for b in blades_]
    return np.asarray(full)[..., idx]


def _result_values(result, dim):
    values = getattr(result, "values", None)
    if values is not None:
        return np.asarray(values, dtype=np.float64)
    arr = np.asarray(result, dtype=np.float64)
    full = np.zeros(arr.shape + (dim,))
    full[..., 0] = arr
    return full


def evaluate_numeric(kernel, arrays) -> np.ndarray:
    """The function over :class:`galinear.MultiVector`, one row at a time; (n, k_out)."""
    from galinear.core import Algebra
    from galinear.core.algebra import MultiVector

    alg = kernel.algebra if isinstance(kernel.algebra, Algebra) else Algebra(*_signature(kernel))
    rows = arrays[0].shape[0]
    out = np.zeros((rows, len(kernel.output_blades)))
    for r in range(rows):
        args = [MultiVector(alg, _to_full(alg, b, a[r])) for b, a in zip(kernel.input_blades.values(), arrays)]
        out[r] = _from_full(alg, kernel.output_blades, _result_values(kernel.func(*args), alg.dim))
    return out


def _signature(kernel):
    metric = tuple(getattr(kernel.algebra, "metric", ()))
    return metric.count(1), metric.count(-1), metric.count(0)


# ---------------------------------------------------------------------------- clifford adapter
class _Unsupported(Exception):
    pass


class _C:
    """A clifford multivector with galinear's operator meanings."""

    __array_priority__ = 1000

    def __init__(self, mv, layout):
        self.mv, self.layout = mv, layout

    def _o(self, other):
        if isinstance(other, _C):
            return other.mv
        values = getattr(other, "values", None)
        if values is not None and getattr(other, "algebra", None) is not None:
            return self.layout.MultiVector(value=np.asarray(values, dtype=np.float64))
        return other * self.layout.scalar

    def _galinear_blade(self, name, value=1):
        from galinear.blades import blade_index

        values = np.zeros(self.layout.gaDims)
        values[blade_index(len(self.layout.sig), name)] = value
        return _C(self.layout.MultiVector(value=values), self.layout)

    def _w(self, mv):
        return _C(mv, self.layout)

    def __add__(self, o):
        return self._w(self.mv + self._o(o))

    __radd__ = __add__

    def __sub__(self, o):
        return self._w(self.mv - self._o(o))

    def __rsub__(self, o):
        return self._w(self._o(o) - self.mv)

    def __neg__(self):
        return self._w(-self.mv)

    def __mul__(self, o):
        return self._w(self.mv * self._o(o))

    def __rmul__(self, o):
        return self._w(self._o(o) * self.mv)

    def __xor__(self, o):
        return self._w(self.mv ^ self._o(o))

    def __rxor__(self, o):
        return self._w(self._o(o) ^ self.mv)

    def _lc(self, a, b):
        return a.lc(b)

    def __lshift__(self, o):
        return self._w(self._lc(self.mv, self._o(o)))

    def __rlshift__(self, o):
        return self._w(self._lc(self._o(o), self.mv))

    def _rc(self, a, b):
        return ~(self._lc(~b, ~a))

    def __rshift__(self, o):
        return self._w(self._rc(self.mv, self._o(o)))

    def __rrshift__(self, o):
        return self._w(self._rc(self._o(o), self.mv))

    def _inner(self, a, b):
        return self._lc(a, b) + self._rc(a, b) - (a * b)(0)

    def __or__(self, o):
        return self._w(self._inner(self.mv, self._o(o)))

    def __ror__(self, o):
        return self._w(self._inner(self._o(o), self.mv))

    def _complement(self, mv, inverse=False):
        """The right complement, blade by blade: e_S -> s e_{S^c} with e_S ^ (s e_{S^c}) = I (its
        inverse: e_{S^c} -> s' e_S with e_{S^c} ^ (s' e_S) = I), from clifford's own blade list;
        metric-free, so it serves degenerate algebras too."""
        n = len(self.layout.sig)
        blades = [tuple(b) for b in self.layout.bladeTupList]
        index = {b: i for i, b in enumerate(blades)}
        out = np.zeros(self.layout.gaDims)
        for i, value in enumerate(np.asarray(mv.value)):
            if value == 0:
                continue
            rest = tuple(k for k in range(1, n + 1) if k not in blades[i])
            order = list(rest) + list(blades[i]) if inverse else list(blades[i]) + list(rest)
            inversions = sum(1 for a in range(n) for b in range(a + 1, n) if order[a] > order[b])
            out[index[rest]] += (-1.0 if inversions % 2 else 1.0) * value
        return self.layout.MultiVector(value=out)

    def _regressive(self, a, b):
        return self._complement(self._complement(a) ^ self._complement(b), inverse=True)

    def __and__(self, o):
        return self._w(self._regressive(self.mv, self._o(o)))

    def __rand__(self, o):
        return self._w(self._regressive(self._o(o), self.mv))

    def __matmul__(self, o):
        return self._w(self.mv * self._o(o) * ~self.mv)

    def __invert__(self):
        return self._w(~self.mv)

    def reverse(self):
        return ~self

    def involute(self):
        return self._w(self.mv.gradeInvol())

    def conjugate(self):
        return self._w(self.mv.conjugate() if hasattr(self.mv, "conjugate") else ~self.mv.gradeInvol())

    def grade(self, *grades):
        out = 0 * self.layout.scalar
        for g in grades:
            out = out + self.mv(g)
        return self._w(out)

    __call__ = grade

    def _pseudoscalar(self):
        return self.layout.pseudoScalar

    def dual(self, kind="auto"):
        if kind == "hodge" or any(s == 0 for s in self.layout.sig):
            raise _Unsupported("the Hodge dual of a degenerate metric")
        return self._w(self.mv * self._pseudoscalar().inv())

    def undual(self, kind="auto"):
        if kind == "hodge" or any(s == 0 for s in self.layout.sig):
            raise _Unsupported("the Hodge dual of a degenerate metric")
        return self._w(self.mv * self._pseudoscalar())

    def inv(self):
        return self._w(self.mv.inv())

    def __truediv__(self, o):
        if isinstance(o, _C):
            return self * o.inv()
        return self._w(self.mv / o)

    def __rtruediv__(self, o):
        return _C(o * self.layout.scalar, self.layout) * self.inv()

    def __pow__(self, k):
        base = self.inv() if k < 0 else self
        out = self._w(1 * self.layout.scalar)
        for _ in range(abs(k)):
            out = out * base
        return out

    def norm(self):
        return self._w(math.sqrt(abs(float((self.mv * ~self.mv)[()]))) * self.layout.scalar)

    def sqrt(self):
        value = float(self.mv[()])
        return self._w(math.sqrt(value) * self.layout.scalar)

    def exp(self):
        size = float(np.max(np.abs(self.mv.value)))
        squarings = max(0, int(math.ceil(math.log2(size))) + 4) if size > 0 else 0
        x = self.mv / (2 ** squarings)
        term, total = 1 * self.layout.scalar, 1 * self.layout.scalar
        for k in range(1, 24):
            term = term * x / k
            total = total + term
        for _ in range(squarings):
            total = total * total
        return self._w(total)

    def normalized(self):
        return self / self.norm()


def evaluate_clifford(kernel, arrays):
    """The function over ``clifford`` multivectors (adapter above), or (None, reason)."""
    try:
        import clifford
    except ImportError:
        return None, "the clifford package is not installed (pip install clifford)"
    p, q, r = _signature(kernel)
    layout, _ = clifford.Cl(p, q, r)
    from galinear.core import Algebra

    alg = kernel.algebra if isinstance(kernel.algebra, Algebra) else Algebra(p, q, r)
    rows = arrays[0].shape[0]
    out = np.zeros((rows, len(kernel.output_blades)))
    try:
        for row in range(rows):
            args = [_C(layout.MultiVector(value=_to_full(alg, b, a[row])), layout)
                    for b, a in zip(kernel.input_blades.values(), arrays)]
            result = kernel.func(*args)
            values = result.mv.value if isinstance(result, _C) else _result_values(result, alg.dim)
            out[row] = _from_full(alg, kernel.output_blades, values)
    except _Unsupported as why:
        return None, f"the clifford adapter has no {why}"
    return out, None


def _scaled_error(got, ref) -> float:
    scale = np.maximum(1.0, np.max(np.abs(ref), axis=-1))
    return float(np.max(np.max(np.abs(got - ref), axis=-1) / scale)) if ref.size else 0.0


def verify_kernel(kernel, n: int = 64, seed: int = 0, dtypes=("float64", "float32"), clifford: bool = True):
    """A :class:`VerifyReport` of ``kernel`` against the references on ``n`` random rows."""
    if kernel.is_backward:
        raise ValueError("verify() checks forward kernels; the backward is checked against central "
                         "differences by galinear.testing.check_kernel_gradient")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100000:
        raise ValueError(f"n must be an integer in 1..100000, got {n!r}")
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    arrays = random_inputs(kernel, n, rng)
    refs = [("galinear", evaluate_numeric(kernel, arrays), None)]
    if clifford:
        ref, why = evaluate_clifford(kernel, arrays)
        refs.append(("clifford", ref, why))
    report = VerifyReport(kernel.name)
    for dtype in dtypes:
        got = _call(kernel, [a.astype(dtype) for a in arrays])
        for name, ref, why in refs:
            if ref is None:
                report.rows.append((name, dtype, None, None, None, why))
                continue
            err = _scaled_error(np.asarray(got, np.float64), ref)
            tol = TOLERANCE[dtype]
            report.rows.append((name, dtype, err, tol, bool(err <= tol), ""))
    report.seconds = time.perf_counter() - start
    return report


def _call(kernel, arrays):
    out = kernel(*arrays)
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    return out
