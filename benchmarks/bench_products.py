"""Batched geometric product in Cl(n), n = 3..10: galinear vs clifford vs numpy einsum, side by side.

Run: ``make bench-core`` (or ``.venv/bin/python benchmarks/bench_products.py [--quick]``).
Writes benchmarks/results/bench_products.{md,json}.

Contenders, all on the same random float64 pairs, each timed as the best of ``--repeats`` runs
after a warm-up call (compilation excluded):

* galinear ``Algebra.gp(a, b, method="table")`` with numba's default threads and with 1 thread;
* galinear ``method="generated"`` (the symbolic generator's straight-line kernel), when one exists;
* clifford: its own compiled product ``layout.gmt_func`` (skips zero entries at run time) and the
  dense variant ``layout.gmt_func_generator(all grades)``, each called row by row from a numba
  loop (clifford has no batched product; this is its fastest batched route); the faster is used;
* numpy ``einsum('bi,bj,ijk->bk')`` over the dense 2**n x 2**n x 2**n Cayley tensor (n <= 6;
  with ``optimize=True`` and ``False``, the faster counts; in chunks of 2048 rows to bound memory;
  on the first 10,000 pairs at most (2,000 for n >= 5), its time scaled to the full count).

Ratios are galinear (1 thread) time over the other's time: below 1 means galinear is faster.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

import numba  # noqa: E402

from galinear import Algebra, blades  # noqa: E402
from galinear._generated import find_kernel  # noqa: E402

PAIRS = {3: 100_000, 4: 100_000, 5: 100_000, 6: 100_000, 7: 20_000, 8: 5_000, 9: 2_000, 10: 500}
#: einsum does 2**n times more arithmetic (dense tensor); it gets at most this many pairs.
EINSUM_PAIRS = 10_000


def best_time(fn, repeats):
    fn()  # warm-up (compilation, caches)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def clifford_batched(mult):
    @numba.njit
    def run(a, b, out):
        for i in range(a.shape[0]):
            out[i] = mult(a[i], b[i])

    return run


def dense_cayley(n):
    index, sign = blades.cayley_tables(n)
    dim = 2**n
    C = np.zeros((dim, dim, dim))
    i, j = np.meshgrid(np.arange(dim), np.arange(dim), indexing="ij")
    C[i, j, index] = sign
    return C


def einsum_product(a, b, C, optimize, chunk=2048):
    out = np.empty_like(a)
    for s in range(0, a.shape[0], chunk):
        out[s : s + chunk] = np.einsum("bi,bj,ijk->bk", a[s : s + chunk], b[s : s + chunk], C, optimize=optimize)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="*", default=list(range(3, 11)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10x fewer pairs")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_products"))
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

        numba.set_num_threads(threads)
        row["galinear_s"] = best_time(lambda: alg.gp(a, b, method="table"), args.repeats)
        numba.set_num_threads(1)
        row["galinear_1thread_s"] = best_time(lambda: alg.gp(a, b, method="table"), args.repeats)
        numba.set_num_threads(threads)

        kernel = find_kernel("gp", alg.metric)
        if kernel is not None:
            out = alg.gp(a, b, method="generated")
            assert np.allclose(out, reference, rtol=0, atol=1e-10)
            numba.set_num_threads(1)
            row["generated_s"] = best_time(lambda: alg.gp(a, b, method="generated"), args.repeats)
            numba.set_num_threads(threads)

        layout, _ = clifford.Cl(n)
        grades = list(range(n + 1))
        best_cf = None
        for name, mult in (
            ("gmt_func", layout.gmt_func),
            ("dense", layout.gmt_func_generator(grades_a=grades, grades_b=grades)),
        ):
            run = clifford_batched(mult)
            out = np.empty_like(a)
            run(a[:2], b[:2], out[:2])
            run(a, b, out)
            assert np.allclose(out, reference, rtol=0, atol=1e-10), "clifford disagrees with galinear"
            t = best_time(lambda: run(a, b, out), args.repeats)
            row[f"clifford_{name}_s"] = t
            if best_cf is None or t < best_cf[1]:
                best_cf = (name, t)
        row["clifford_s"], row["clifford_route"] = best_cf[1], best_cf[0]

        if n <= 6:
            C = dense_cayley(n)
            m = min(pairs, EINSUM_PAIRS if n <= 4 else EINSUM_PAIRS // 5)
            row["einsum_pairs"] = m
            for optimize in (True, False):
                assert np.allclose(einsum_product(a[:64], b[:64], C, optimize), reference[:64], atol=1e-10)
                t = best_time(lambda: einsum_product(a[:m], b[:m], C, optimize), args.repeats) * pairs / m
                row[f"einsum_optimize_{optimize}_s"] = t
                if t < row.get("einsum_s", float("inf")):
                    row["einsum_s"], row["einsum_route"] = t, f"optimize={optimize}"
        rows.append(row)
        print(format_row(row), flush=True)

    meta = {
        "command": "make bench-core  (.venv/bin/python benchmarks/bench_products.py"
        + (" --quick" if args.quick else "") + ")",
        "numba_threads": threads,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs",
        "numpy": np.__version__,
        "numba": numba.__version__,
        "clifford": clifford.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(args.out + ".json.tmp")
    tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    os.replace(tmp, args.out + ".json")
    tmp = Path(args.out + ".md.tmp")
    tmp.write_text(markdown(meta, rows))
    os.replace(tmp, args.out + ".md")
    print(f"wrote {args.out}.md and .json")
    return 0


def ns_per_pair(row, key):
    return 1e9 * row[key] / row["pairs"] if key in row else None


def format_row(row):
    parts = [f"n={row['n']:2d} pairs={row['pairs']:7d}"]
    for key in ("galinear_s", "galinear_1thread_s", "generated_s", "clifford_s", "einsum_s"):
        if key in row:
            parts.append(f"{key[:-2]}={ns_per_pair(row, key):10.1f} ns/pair")
    g = row["galinear_1thread_s"]
    parts.append(f"galinear/clifford={g / row['clifford_s']:.3f}")
    if "einsum_s" in row:
        parts.append(f"galinear/einsum={g / row['einsum_s']:.3f}")
    if "generated_s" in row:
        parts.append(f"generated/table={row['generated_s'] / g:.3f}")
    return "  ".join(parts)


def markdown(meta, rows):
    def cell(row, key):
        v = ns_per_pair(row, key)
        return "-" if v is None else f"{v:,.0f}"

    lines = [
        "# Batched geometric product: galinear vs clifford vs einsum",
        "",
        f"Command: `{meta['command']}`. {meta['date']}; {meta['machine']}; numpy {meta['numpy']}, "
        f"numba {meta['numba']} ({meta['numba_threads']} threads by default), clifford {meta['clifford']}.",
        "Times are ns per pair, best of the repeats, float64, random dense multivectors; einsum runs on",
        f"at most {EINSUM_PAIRS:,} of the pairs ({EINSUM_PAIRS // 5:,} for n >= 5), optimize=True or False,",
        "whichever is faster (time per pair reported); ratios use",
        "galinear on 1 thread (clifford's loop is single-threaded; einsum's BLAS may use several).",
        "",
        "| n | pairs | galinear table | galinear 1 thread | generated (1 thread) | clifford (route) | einsum | galinear/clifford | galinear/einsum | generated/table |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        g = row["galinear_1thread_s"]
        ratio_c = f"{g / row['clifford_s']:.3f}"
        ratio_e = f"{g / row['einsum_s']:.3f}" if "einsum_s" in row else "-"
        ratio_g = f"{row['generated_s'] / g:.3f}" if "generated_s" in row else "-"
        lines.append(
            f"| {row['n']} | {row['pairs']:,} | {cell(row, 'galinear_s')} | {cell(row, 'galinear_1thread_s')} | "
            f"{cell(row, 'generated_s')} | {cell(row, 'clifford_s')} ({row['clifford_route']}) | "
            f"{cell(row, 'einsum_s')}{' (' + row['einsum_route'] + ')' if 'einsum_route' in row else ''} | {ratio_c} | {ratio_e} | {ratio_g} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
