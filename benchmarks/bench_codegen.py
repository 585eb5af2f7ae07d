"""Generated straight-line kernels vs table-driven kernels, side by side (``make bench-codegen``).

For Euclidean Cl(n), n = 1..6, batched geometric products ``out[i] = a[i] b[i]`` timed in one
run, interleaved (every repeat times every method once, best of the repeats is kept):

- ``generated``: ``Algebra(n).gp(a, b, method="generated")`` (the galinear/_generated kernel
  behind the core's input checks);
- ``table``: ``Algebra(n).gp(a, b, method="table")`` (the core's table-driven numba kernel,
  parallel over row chunks), also timed with numba limited to 1 thread (``table_1thread``):
  the generated kernel is serial, and thread wake-ups dominate small products on a busy machine;
- ``kernel``: the generated kernel called directly (no checks, preallocated output);
- ``einsum``: numpy ``einsum("bi,bj,ijk->bk")`` over the dense Cayley tensor from
  ``galinear.blades.cayley_tables``.

Speed is reported as ratios (> 1: the generated kernel is faster). Results go to
benchmarks/results/bench_codegen.{md,json}. Compilation is excluded (every kernel is called
once before timing); the first-call compile cost is reported separately.
"""
import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def dense_cayley(n):
    from galinear import blades

    index, sign = blades.cayley_tables(n)
    dim = 1 << n
    tensor = np.zeros((dim, dim, dim))
    i, j = np.meshgrid(np.arange(dim), np.arange(dim), indexing="ij")
    tensor[i, j, index] = sign
    return tensor


def interleaved_best(methods, repeats):
    """Best time of each method; every repeat runs every method once (drift hits all alike).

    Entries may be ``(fn, threads)``: numba's thread count is set to ``threads`` around the call.
    """
    import numba

    best = {name: float("inf") for name in methods}
    default_threads = numba.get_num_threads()
    for _ in range(repeats):
        for name, entry in methods.items():
            fn, threads = entry if isinstance(entry, tuple) else (entry, default_threads)
            numba.set_num_threads(threads)
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
            numba.set_num_threads(default_threads)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096, help="rows per product (default 4096)")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved repeats, best kept (default 15)")
    parser.add_argument("--max-n", type=int, default=6)
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--out", default=str(RESULTS), help="folder for bench_codegen.{md,json}")
    args = parser.parse_args(argv)

    import numba

    from galinear import Algebra, _io
    from galinear._generated import find_kernel

    rng = np.random.default_rng(0)
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = np.dtype(dtype_name)
        for n in range(1, args.max_n + 1):
            algebra = Algebra(n)
            dim = 1 << n
            a = rng.standard_normal((args.batch, dim)).astype(dtype)
            b = rng.standard_normal((args.batch, dim)).astype(dtype)
            out = np.empty_like(a)
            kernel = find_kernel("gp", n)
            cayley = dense_cayley(n).astype(dtype)
            start = time.perf_counter()
            algebra.gp(a, b, method="generated")
            compile_generated = time.perf_counter() - start
            start = time.perf_counter()
            algebra.gp(a, b, method="table")
            compile_table = time.perf_counter() - start
            kernel(a, b, out)
            ref = np.einsum("bi,bj,ijk->bk", a, b, cayley, optimize=True)
            tol = 1e-4 if dtype == np.float32 else 1e-10
            np.testing.assert_allclose(algebra.gp(a, b, method="generated"), algebra.gp(a, b, method="table"), rtol=tol, atol=tol)
            np.testing.assert_allclose(out, ref, rtol=tol * 10, atol=tol * 10)
            best = interleaved_best(
                {
                    "generated": lambda: algebra.gp(a, b, method="generated"),
                    "table": lambda: algebra.gp(a, b, method="table"),
                    "table_1thread": (lambda: algebra.gp(a, b, method="table"), 1),
                    "kernel": lambda: kernel(a, b, out),
                    "einsum": lambda: np.einsum("bi,bj,ijk->bk", a, b, cayley, optimize=True),
                },
                args.repeats,
            )
            row = {
                "dtype": dtype_name,
                "n": n,
                "batch": args.batch,
                **{f"{k}_ms": v * 1e3 for k, v in best.items()},
                "first_call_generated_s": compile_generated,
                "first_call_table_s": compile_table,
                "table_over_generated": best["table"] / best["generated"],
                "table_1thread_over_generated": best["table_1thread"] / best["generated"],
                "einsum_over_generated": best["einsum"] / best["generated"],
                "table_over_kernel": best["table"] / best["kernel"],
                "table_1thread_over_kernel": best["table_1thread"] / best["kernel"],
            }
            rows.append(row)
            print(
                f"{dtype_name:8s} n={n}  generated {row['generated_ms']:8.3f} ms  table {row['table_ms']:8.3f} ms  "
                f"einsum {row['einsum_ms']:9.3f} ms  table/gen {row['table_over_generated']:6.2f}  "
                f"table(1 thread)/gen {row['table_1thread_over_generated']:6.2f}  "
                f"einsum/gen {row['einsum_over_generated']:7.2f}",
                flush=True,
            )
    def winning(numerator_keys):
        return sorted(
            {
                r["n"]
                for r in rows
                if all(min(x[k] for k in numerator_keys) > 1 for x in rows if x["n"] == r["n"])
            }
        )

    wins = winning(("table_over_generated", "table_1thread_over_generated"))
    kernel_wins = winning(("table_over_kernel", "table_1thread_over_kernel"))
    meta = {
        "command": "make bench-codegen  (= .venv/bin/python benchmarks/bench_codegen.py"
        + ("" if argv is None and len(sys.argv) == 1 else " " + " ".join(sys.argv[1:] if argv is None else argv))
        + ")",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "note": "one run, methods interleaved, best of repeats; shared machine, so compare ratios, not absolute times",
        "generated_wins_at_n": wins,
        "generated_kernel_wins_at_n": kernel_wins,
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    _io.atomic_write_text(out_dir / "bench_codegen.json", json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Generated vs table-driven kernels (geometric product, Euclidean Cl(n))",
        "",
        f"Command: `{meta['command']}`. Batch {args.batch} rows, best of {args.repeats} interleaved repeats, "
        f"numba {meta['numba']} with {meta['numba_threads']} threads, {meta['cpu_count']} CPUs (shared: read the ratios).",
        "",
        "`generated` / `table`: `Algebra(n).gp(..., method=...)`; `kernel`: the generated kernel called directly; "
        "`einsum`: numpy over the dense Cayley tensor. Ratios > 1 mean the generated kernel is faster.",
        "",
        "| dtype | n | generated ms | table ms | table 1 thread ms | kernel ms | einsum ms | table / generated | table 1 thread / generated | table / kernel | table 1 thread / kernel | einsum / generated | first call generated s | first call table s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dtype']} | {r['n']} | {r['generated_ms']:.3f} | {r['table_ms']:.3f} | {r['table_1thread_ms']:.3f} | "
            f"{r['kernel_ms']:.3f} | {r['einsum_ms']:.3f} | {r['table_over_generated']:.2f} | "
            f"{r['table_1thread_over_generated']:.2f} | {r['table_over_kernel']:.2f} | {r['table_1thread_over_kernel']:.2f} | "
            f"{r['einsum_over_generated']:.1f} | {r['first_call_generated_s']:.2f} | {r['first_call_table_s']:.2f} |"
        )
    lines += [
        "",
        f"Through `Algebra.gp` (generated path including the core's input checks), generated beats the table "
        f"kernel (default threads and 1 thread, both dtypes) at n = {wins}.",
        f"Kernel against kernel (generated kernel called directly vs `Algebra.gp(method='table')`): n = {kernel_wins}.",
        "",
    ]
    _io.atomic_write_text(out_dir / "bench_codegen.md", "\n".join(lines))
    print("\n".join(lines[-3:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
