"""Per-call overhead of galinear.MultiVector against the array API it wraps.

For each operation and batch size, times the Algebra call on arrays (``alg.gp(a, b)``) and the
operator on MultiVectors (``A * B``) round-robin in one process, best of the repeats, and prints
the two times side by side with their ratio and the difference (the class's constant cost).

Run: .venv/bin/python benchmarks/bench_multivector.py [--n 3] [--repeats 7]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from galinear import Algebra, MultiVector


def _best(fn, number: int, repeats: int, results: list) -> None:
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        results.append((time.perf_counter() - t0) / number)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 100, 10000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"# MultiVector overhead ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{platform.machine()}, numpy {np.__version__}; times in microseconds per call, best of {args.repeats})")
    print()
    print("| n | batch | operation | array API | MultiVector | ratio | overhead |")
    print("|---|---|---|---|---|---|---|")
    for n in args.n:
        alg = Algebra(n)
        rng = np.random.default_rng(0)
        for batch in args.batch:
            shape = () if batch == 1 else (batch,)
            a = rng.standard_normal(shape + (alg.dim,))
            b = rng.standard_normal(shape + (alg.dim,))
            A, B = MultiVector(alg, a), MultiVector(alg, b)
            cases = [
                ("a * b", lambda: alg.gp(a, b), lambda: A * B),
                ("a ^ b", lambda: alg.op(a, b), lambda: A ^ B),
                ("a << b", lambda: alg.lc(a, b), lambda: A << B),
                ("~a", lambda: alg.reverse(a), lambda: ~A),
                ("a + b", lambda: a + b, lambda: A + B),
                ("a(2)", lambda: alg.grade(a, 2), lambda: A(2)),
                ("R @ x", lambda: alg.gp(alg.gp(a, b), alg.reverse(a)), lambda: A @ B),
            ]
            for name, raw, wrapped in cases:
                raw(), wrapped()  # compile / warm up
                number = max(1, int(2000 / max(1, batch * alg.dim / 64)))
                t_raw, t_mv = [], []
                for _ in range(args.repeats):  # round-robin, so load drifts hit both alike
                    _best(raw, number, 1, t_raw)
                    _best(wrapped, number, 1, t_mv)
                r, m = min(t_raw) * 1e6, min(t_mv) * 1e6
                print(f"| {n} | {batch:,} | `{name}` | {r:.2f} | {m:.2f} | {m / r:.2f} | {m - r:+.2f} |")


if __name__ == "__main__":
    main()
