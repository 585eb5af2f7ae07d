"""The helpers of the proof scripts in :mod:`galinear.proofs` (sympy only; formerly ``proving``).

A proof script defines ``IDENTITY`` (one line), ``N_MIN``, ``N_DEFAULT`` and
``prove(n_max, log)``, and ends with ``raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))``.
Every check is exact: ``simplify(lhs - rhs) == 0`` on symbolic or rational coefficients.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from fractions import Fraction

import sympy as sp

from galinear.symbolic.multivector import MultiVector

__all__ = ["ProofLog", "run_proof", "is_zero", "random_rational", "rational_orthogonal", "rational_multivector"]


def is_zero(value, simplifier=sp.simplify) -> bool:
    """Exact zero test: every coefficient (or the expression) simplifies to 0."""
    if isinstance(value, MultiVector):
        return all(simplifier(c) == 0 for c in value.coefficients)
    if isinstance(value, sp.MatrixBase):
        return all(simplifier(c) == 0 for c in value)
    if isinstance(value, (list, tuple)):
        return all(is_zero(v, simplifier) for v in value)
    return simplifier(sp.sympify(value)) == 0


class ProofLog:
    """Collects named exact checks and prints one line per check."""

    def __init__(self, identity: str, stream=None):
        self.identity = identity
        self.stream = stream or sys.stdout
        self.failures = 0
        self.checks = 0

    def note(self, text: str) -> None:
        print(f"  . {text}", file=self.stream, flush=True)

    def check(self, label: str, difference, simplifier=sp.simplify) -> bool:
        """Record ``label`` as proved if ``difference`` is exactly zero."""
        ok = is_zero(difference, simplifier)
        self.record(label, ok)
        return ok

    def record(self, label: str, ok: bool) -> None:
        self.checks += 1
        if not ok:
            self.failures += 1
        print(f"  {'ok  ' if ok else 'FAIL'} {label}", file=self.stream, flush=True)


def run_proof(identity: str, n_min: int, n_default: int, prove, argv=None) -> int:
    """Parse ``--n``, run ``prove(n_max, log)``, print a summary; exit code 0 iff all checks pass."""
    parser = argparse.ArgumentParser(description=identity)
    parser.add_argument("--n", type=int, default=n_default, help=f"largest n to prove (default {n_default})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rational spot checks")
    args = parser.parse_args(argv)
    if args.n < n_min:
        parser.error(f"--n must be at least {n_min} for this identity")
    random.seed(args.seed)
    log = ProofLog(identity)
    print(f"proof: {identity} (n = {n_min}..{args.n})", flush=True)
    start = time.perf_counter()
    try:
        prove(args.n, log)
    except Exception as exc:  # a crash is a failed proof, reported as such
        log.record(f"crashed: {type(exc).__name__}: {exc}", False)
    seconds = time.perf_counter() - start
    verdict = "PROVED" if log.failures == 0 and log.checks > 0 else "FAILED"
    print(f"{verdict}: {log.checks - log.failures}/{log.checks} checks exact, {seconds:.1f} s", flush=True)
    return 0 if verdict == "PROVED" else 1


def random_rational(rng: random.Random | None = None, bound: int = 5, denominator: int = 4) -> sp.Rational:
    """A random rational p/q with |p| <= bound*q, 1 <= q <= denominator."""
    rng = rng or random
    q = rng.randint(1, denominator)
    return sp.Rational(rng.randint(-bound * q, bound * q), q)


def rational_multivector(metric, grades=None, rng=None) -> MultiVector:
    """A multivector with random rational coefficients (only the given grades)."""
    from galinear import blades

    m = MultiVector(metric)
    grade_of = blades.blade_grades(m.n).tolist()
    return MultiVector(
        m.metric, [random_rational(rng) if grades is None or g in grades else 0 for g in grade_of]
    )


def rational_orthogonal(n: int, rng: random.Random | None = None) -> sp.Matrix:
    """An exact rational orthogonal matrix: the Cayley transform (I - S)^-1 (I + S), S skew."""
    rng = rng or random
    S = sp.zeros(n, n)
    for i in range(n):
        for j in range(i + 1, n):
            value = sp.Rational(Fraction(rng.randint(-3, 3), rng.randint(1, 3)))
            S[i, j] = value
            S[j, i] = -value
    identity = sp.eye(n)
    return (identity - S).inv() * (identity + S)
