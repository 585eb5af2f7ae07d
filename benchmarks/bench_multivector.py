"""Per-call cost of galinear.MultiVector: single calls against kingdon and clifford, and the
overhead against the array API it wraps.

Single calls (``--part single``): one unbatched multivector each, in Cl(3) and PGA Cl(3,0,1):
vector * vector, a rotor (PGA: motor) sandwich of a vector, and full * full (every blade
non-zero). The operands of each library are built once, from the same coefficients
(galinear's from bare arrays, grades inferred), and the results compared before timing. Each
sample is a loop of calls lasting about SAMPLE_SECONDS; the samples of the three libraries are
taken round-robin in one process and the median of the repeats is printed, with the ratios
other / galinear (> 1: galinear is faster).

Overhead (``--part overhead``): for each operation and batch size, the Algebra call on arrays
(``alg.gp(a, b)``) and the operator on MultiVectors (``A * B``), best of the repeats (each a loop
of calls lasting about SAMPLE_SECONDS, taken round-robin), side by side with their ratio and the
difference (the class's constant cost).

Run: .venv/bin/python benchmarks/bench_multivector.py [--part single overhead] [--repeats 7]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, header, markdown_table, metadata, ratio, round_robin, statistic  # noqa: E402
from galinear import Algebra, MultiVector  # noqa: E402

#: Shortest duration of one timing sample.
SAMPLE_SECONDS = 0.02


def _single_cases(alg, rng):
    """name -> (galinear thunk, kingdon thunk, clifford thunk), after checking the three agree."""
    def draw(grades):
        values = rng.standard_normal(alg.dim)
        values[~np.isin(alg.grades, grades)] = 0.0
        return values

    operands = {"v": draw((1,)), "w": draw((1,)), "R": alg.exp(draw((2,)) * 0.5),
                "A": rng.standard_normal(alg.dim), "B": rng.standard_normal(alg.dim)}
    g = {k: MultiVector(alg, v) for k, v in operands.items()}  # grades inferred from the arrays
    k = {k: x.to_kingdon() for k, x in g.items()}
    c = {k: x.to_clifford() for k, x in g.items()}
    rot = "motor" if 0 in alg.metric else "rotor"
    cases = {
        "vector * vector": (lambda: g["v"] * g["w"], lambda: k["v"] * k["w"], lambda: c["v"] * c["w"]),
        f"{rot} @ vector": (lambda: g["R"] @ g["v"], lambda: k["R"] >> k["v"], lambda: c["R"] * c["v"] * ~c["R"]),
        "full * full": (lambda: g["A"] * g["B"], lambda: k["A"] * k["B"], lambda: c["A"] * c["B"]),
    }
    for name, (fg, fk, fc) in cases.items():
        ours = fg().values
        for theirs in (MultiVector.from_kingdon(fk(), alg).values, alg.from_clifford(fc())):
            assert np.allclose(ours, theirs, atol=1e-12), name
    return cases


def single_calls(repeats: int) -> None:
    """Print the single-call table (median of ``repeats`` samples, microseconds per call)."""
    print(f"## Single calls against kingdon and clifford (median of {repeats}; microseconds per call)")
    print()
    rows = []
    for alg in (Algebra(3), Algebra(3, 0, 1)):
        for name, fns in _single_cases(alg, np.random.default_rng(0)).items():
            timings = round_robin(dict(zip(("galinear", "kingdon", "clifford"), fns)), repeats,
                                  min_sample_seconds=SAMPLE_SECONDS)
            g, k, c = (seconds * 1e6 for seconds in statistic(timings, "median").values())
            rows.append([repr(alg), f"`{name}`", g, k, c, ratio(k / g), ratio(c / g)])
    print(markdown_table(["algebra", "call", "galinear", "kingdon", "clifford", "kingdon / galinear",
                          "clifford / galinear"], rows, formats=[None, None, ".2f", ".2f", ".2f", None, None]))
    print()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="+", choices=["single", "overhead"], default=["single", "overhead"])
    parser.add_argument("--n", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 100, 10000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print("# MultiVector per-call cost")
    print()
    print(header(metadata(command_line(__file__, argv), packages=("numpy", "numba", "kingdon", "clifford"))))
    print()
    if "single" in args.part:
        single_calls(args.repeats)
    if "overhead" not in args.part:
        return
    print(f"## MultiVector overhead (times in microseconds per call, best of {args.repeats})")
    print()
    rows = []
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
                best = statistic(round_robin({"raw": raw, "wrapped": wrapped}, args.repeats,
                                             min_sample_seconds=SAMPLE_SECONDS), "best")
                r, m = best["raw"] * 1e6, best["wrapped"] * 1e6
                rows.append([n, f"{batch:,}", f"`{name}`", r, m, ratio(m / r), f"{m - r:+.2f}"])
    print(markdown_table(["n", "batch", "operation", "array API", "MultiVector", "ratio", "overhead"], rows,
                         formats=[None, None, None, ".2f", ".2f", None, None]))


if __name__ == "__main__":
    main()
