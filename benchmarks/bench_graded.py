"""Grade-aware products of galinear.MultiVector against kingdon and clifford, side by side.

Workloads in PGA Cl(3,0,1) and CGA Cl(4,1): vector * vector, bivector * vector, a motor
sandwich of points (one motor applied to every point, and one motor per point) and
even * even, each on a batch of N multivectors. Every library works on its own batched layout
(galinear: MultiVectors built from the bare arrays, grades inferred; rows of the coefficients of the operands' grades, packed; kingdon: one numpy array per blade; clifford: its MVArray,
timed at N <= 10**4 only, being an object array). Times are the best of the repeats (each a
loop of calls), taken round-robin in one process so that load drifts hit all alike; the ratios are what to read.
Results are checked against each other before timing (max difference printed).

Run: .venv/bin/python benchmarks/bench_graded.py [--batch 10000 1000000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (command_line, header, markdown_row, markdown_table, metadata, ratio,  # noqa: E402
                     round_robin, statistic)
from galinear import Algebra, MultiVector  # noqa: E402

CLIFFORD_MAX_BATCH = 10_000


#: Shortest duration of one timing sample (calls are repeated in a loop until it is reached, so a
#: sample measures the call, not the caches another library left).
SAMPLE_SECONDS = 0.02


def _operands(alg, rng, batch):
    """name -> (grades, values (batch, dim)) for the workloads' operands."""
    even = tuple(range(0, alg.n + 1, 2))
    point = (3,) if 0 in alg.metric else (1,)  # PGA points are trivectors, CGA points vectors

    def draw(grades, rows):
        values = rng.standard_normal((rows, alg.dim))
        values[:, ~np.isin(alg.grades, grades)] = 0.0
        return grades, values

    motor = alg.exp(draw((2,), 1)[1][0] * 0.5)
    motors = alg.exp(draw((2,), batch)[1] * 0.5)
    return {
        "vector": draw((1,), batch), "vector2": draw((1,), batch), "bivector": draw((2,), batch),
        "even": draw(even, batch), "even2": draw(even, batch), "point": draw(point, batch),
        "motor": (even, motor), "motors": (even, motors),
    }


WORKLOADS = [
    ("vector * vector", "gp", "vector", "vector2"),
    ("bivector * vector", "gp", "bivector", "vector"),
    ("even * even", "gp", "even", "even2"),
    ("one motor >> N points", "sw", "motor", "point"),
    ("N motors >> N points", "sw", "motors", "point"),
]


def _galinear(alg, grades, values):
    """A MultiVector from the bare array: its grades are read from the zero columns, not declared."""
    mv = MultiVector(alg, values)
    assert mv.known_grades == tuple(sorted(grades)), (mv.known_grades, grades)
    return mv


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        import kingdon
    except ImportError:
        raise SystemExit("bench_graded compares against kingdon: pip install kingdon") from None
    try:
        import clifford  # noqa: F401
    except ImportError:
        clifford = None
    print("# grade-aware products of galinear.MultiVector vs kingdon and clifford")
    print()
    print(header(metadata(command_line(__file__, argv, make_target="bench-graded"),
                          packages=("numpy", "numba", "kingdon", "clifford"))))
    print()
    print(f"Milliseconds per call: the best of {args.repeats} samples, interleaved, each a loop of calls lasting "
          f"at least {SAMPLE_SECONDS * 1e3:g} ms; ratio = other / galinear.")
    print()
    columns = ["algebra", "N", "workload", "galinear", "galinear dense", "kingdon", "clifford", "kingdon / galinear",
               "clifford / galinear", "max diff"]
    formats = [None, None, None, ".3f", ".3f", ".3f", ".3f", None, None, ".1e"]
    print(markdown_table(columns, []))  # the header; then each row as it is measured
    for signature, label in [((3, 0, 1), "PGA Cl(3,0,1)"), ((4, 1, 0), "CGA Cl(4,1)")]:
        alg = Algebra(*signature)
        kalg = kingdon.Algebra(*signature)
        for batch in args.batch:
            rng = np.random.default_rng(0)
            ops = _operands(alg, rng, batch)
            for name, kind, left, right in WORKLOADS:
                (ga, a), (gb, b) = ops[left], ops[right]
                A, B = _galinear(alg, ga, a), _galinear(alg, gb, b)
                KA, KB = A.to_kingdon(kalg), B.to_kingdon(kalg)  # only the blades of the grades
                if kind == "gp":
                    ours, dense, theirs = (lambda: A * B), (lambda: alg.gp(a, b)), (lambda: KA * KB)
                else:
                    ours = lambda: A @ B  # noqa: E731
                    dense = lambda: alg.gp(alg.gp(a, b), alg.reverse(a))  # noqa: E731
                    theirs = lambda: KA >> KB  # noqa: E731
                cases = {"galinear": ours, "dense": dense, "kingdon": theirs}
                if clifford is not None and batch <= CLIFFORD_MAX_BATCH:
                    CA, CB = alg.to_clifford(a), alg.to_clifford(b)
                    cases["clifford"] = (lambda: CA * CB) if kind == "gp" else (lambda: CA * CB * ~CA)
                results = {key: fn() for key, fn in cases.items()}  # compile / warm up, then check
                want = np.asarray(results["dense"])
                diff = max(np.max(np.abs(results["galinear"].values - want)),
                           np.max(np.abs(MultiVector.from_kingdon(results["kingdon"], alg).values - want)))
                if "clifford" in results:
                    diff = max(diff, np.max(np.abs(alg.from_clifford(results["clifford"]) - want)))
                best = {key: t * 1e3 for key, t in statistic(
                    round_robin(cases, args.repeats, warmup=0, min_sample_seconds=SAMPLE_SECONDS), "best").items()}
                cl = best.get("clifford")
                row = [label, f"{batch:,}", name, best["galinear"], best["dense"], best["kingdon"], cl,
                       ratio(best["kingdon"] / best["galinear"]),
                       None if cl is None else ratio(cl / best["galinear"], 1), diff]
                print(markdown_row(row, formats), flush=True)


if __name__ == "__main__":
    main()
