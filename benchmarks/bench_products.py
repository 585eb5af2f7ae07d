"""Batched geometric product in Cl(n), n = 3..10: galinear vs clifford vs numpy einsum, side by side.

Run: ``make bench-core`` (or ``.venv/bin/python benchmarks/bench_products.py [--quick]``).
Writes benchmarks/results/bench_products.{md,json}.

Contenders, all on the same random float64 pairs, each timed as the best of ``--repeats`` runs
after a warm-up call (compilation excluded), round-robin so that load drift hits all alike:

* galinear ``Algebra.gp(a, b)`` (``method="auto"``) on 1 thread: the number the ratios use;
* galinear ``method="table"`` with 1 thread and with numba's default threads;
* galinear ``method="generated"`` (the symbolic generator's straight-line kernel), when one exists;
* clifford: its own compiled product ``layout.gmt_func`` (skips zero entries at run time) and the
  dense variant ``layout.gmt_func_generator(all grades)``, each called row by row from a numba
  loop (clifford has no batched product; this is its fastest batched route); the faster is used;
* numpy ``einsum('bi,bj,ijk->bk')`` over the dense 2**n x 2**n x 2**n Cayley tensor (n <= 6;
  with ``optimize=True`` and ``False``, the faster counts; in chunks of 2048 rows to bound memory;
  on the first 10,000 pairs at most (2,000 for n >= 5), its time scaled to the full count).

Ratios are galinear (auto, 1 thread) time over the other's time: below 1 means galinear is faster.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, ROOT, Contender, command_line, dense_cayley, header, markdown_table,  # noqa: E402
                     metadata, number, ratio, round_robin, write_results)

os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

import numba  # noqa: E402

from galinear import Algebra  # noqa: E402
from galinear._generated import find_kernel  # noqa: E402

PAIRS = {3: 100_000, 4: 100_000, 5: 100_000, 6: 100_000, 7: 20_000, 8: 5_000, 9: 2_000, 10: 500}
#: einsum does 2**n times more arithmetic (dense tensor); it gets at most this many pairs.
EINSUM_PAIRS = 10_000


def clifford_batched(mult):
    @numba.njit
    def run(a, b, out):
        for i in range(a.shape[0]):
            out[i] = mult(a[i], b[i])

    return run


def einsum_product(a, b, C, optimize, chunk=2048):
    out = np.empty_like(a)
    for s in range(0, a.shape[0], chunk):
        out[s : s + chunk] = np.einsum("bi,bj,ijk->bk", a[s : s + chunk], b[s : s + chunk], C, optimize=optimize)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="*", default=list(range(3, 11)))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="10x fewer pairs")
    parser.add_argument("--out", default=str(RESULTS / "bench_products"))
    args = parser.parse_args(argv)
    import clifford

    threads = numba.get_num_threads()
    rng = np.random.default_rng(0)
    rows = []
    for n in args.n:
        pairs = PAIRS[n] // (10 if args.quick else 1)
        alg = Algebra(n)
        a = rng.standard_normal((pairs, alg.dim))
        b = rng.standard_normal((pairs, alg.dim))
        reference = alg.gp(a, b, method="table")
        row = {"n": n, "pairs": pairs}
        fns = {
            "galinear_auto_s": Contender(lambda: alg.gp(a, b), threads=1),
            "galinear_1thread_s": Contender(lambda: alg.gp(a, b, method="table"), threads=1),
            "galinear_s": Contender(lambda: alg.gp(a, b, method="table"), threads=threads),
        }
        if find_kernel("gp", alg.metric) is not None:
            assert np.allclose(alg.gp(a, b, method="generated"), reference, rtol=0, atol=1e-10)
            fns["generated_s"] = Contender(lambda: alg.gp(a, b, method="generated"), threads=1)

        layout, _ = clifford.Cl(n)
        grades = list(range(n + 1))
        outs = {}
        for name, mult in (
            ("gmt_func", layout.gmt_func),
            ("dense", layout.gmt_func_generator(grades_a=grades, grades_b=grades)),
        ):
            run = clifford_batched(mult)
            out = outs[name] = np.empty_like(a)
            run(a, b, out)
            assert np.allclose(out, reference, rtol=0, atol=1e-10), "clifford disagrees with galinear"
            fns[f"clifford_{name}_s"] = (lambda run=run, out=out: run(a, b, out))

        einsum_scale = {}
        if n <= 6:
            C = dense_cayley(n)
            m = min(pairs, EINSUM_PAIRS if n <= 4 else EINSUM_PAIRS // 5)
            row["einsum_pairs"] = m
            for optimize in (True, False):
                assert np.allclose(einsum_product(a[:64], b[:64], C, optimize), reference[:64], atol=1e-10)
                key = f"einsum_optimize_{optimize}_s"
                fns[key] = (lambda optimize=optimize, m=m: einsum_product(a[:m], b[:m], C, optimize))
                einsum_scale[key] = pairs / m
        timings = round_robin(fns, args.repeats)
        for key, t in timings.items():
            row[key] = t.best * einsum_scale.get(key, 1.0)
        cf = min(("gmt_func", "dense"), key=lambda name: row[f"clifford_{name}_s"])
        row["clifford_s"], row["clifford_route"] = row[f"clifford_{cf}_s"], cf
        if n <= 6:
            opt = min((True, False), key=lambda o: row[f"einsum_optimize_{o}_s"])
            row["einsum_s"], row["einsum_route"] = row[f"einsum_optimize_{opt}_s"], f"optimize={opt}"
        rows.append(row)
        print(format_row(row), flush=True)

    meta = metadata(command_line(__file__, argv, make_target="bench-core"),
                    packages=("numpy", "numba", "clifford"))
    write_results(args.out, {"meta": meta, "rows": rows}, markdown(meta, rows))
    print(f"wrote {args.out}.md and .json")
    return 0


def ns_per_pair(row, key):
    return 1e9 * row[key] / row["pairs"] if key in row else None


def format_row(row):
    parts = [f"n={row['n']:2d} pairs={row['pairs']:7d}"]
    for key in ("galinear_auto_s", "galinear_1thread_s", "galinear_s", "generated_s", "clifford_s", "einsum_s"):
        if key in row:
            parts.append(f"{key[:-2]}={ns_per_pair(row, key):10.1f} ns/pair")
    g = row["galinear_auto_s"]
    parts.append(f"galinear/clifford={g / row['clifford_s']:.3f}")
    if "einsum_s" in row:
        parts.append(f"galinear/einsum={g / row['einsum_s']:.3f}")
    if "generated_s" in row:
        parts.append(f"generated/table={row['generated_s'] / row['galinear_1thread_s']:.3f}")
    return "  ".join(parts)


def markdown(meta, rows):
    def cell(row, key):
        return number(ns_per_pair(row, key), digits=0)

    def routed(row, key, route):
        return f"{cell(row, key)} ({row[route]})" if route in row else cell(row, key)

    def over(row, num, den):
        return ratio(row[num] / row[den], 3) if num in row and den in row else None

    table = markdown_table(
        ["n", "pairs", "galinear auto", "table", "table 2 thr", "generated", "clifford (route)", "einsum",
         "auto/clifford", "auto/einsum", "generated/table"],
        ([row["n"], f"{row['pairs']:,}", cell(row, "galinear_auto_s"), cell(row, "galinear_1thread_s"),
          cell(row, "galinear_s"), cell(row, "generated_s"), routed(row, "clifford_s", "clifford_route"),
          routed(row, "einsum_s", "einsum_route"), over(row, "galinear_auto_s", "clifford_s"),
          over(row, "galinear_auto_s", "einsum_s"), over(row, "generated_s", "galinear_1thread_s")] for row in rows))
    lines = [
        "# Batched geometric product: galinear vs clifford vs einsum",
        "",
        header(meta),
        "Times are ns per pair, best of the repeats, float64, random dense multivectors; einsum runs on",
        f"at most {EINSUM_PAIRS:,} of the pairs ({EINSUM_PAIRS // 5:,} for n >= 5), optimize=True or False,",
        "whichever is faster (time per pair reported). All contenders of one n are timed round-robin.",
        "Ratios use galinear `gp` with `method=\"auto\"` on 1 thread (clifford's loop is single-threaded;",
        "einsum's BLAS may use several); \"table 2 thr\" is the table kernel with numba's default threads.",
        "",
        table,
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
