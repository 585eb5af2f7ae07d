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
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, Contender, command_line, dense_cayley, header, markdown_table,  # noqa: E402
                     metadata, ratio, round_robin, write_results)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096, help="rows per product (default 4096)")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved repeats, best kept (default 15)")
    parser.add_argument("--max-n", type=int, default=6)
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--out", default=str(RESULTS), help="folder for bench_codegen.{md,json}")
    args = parser.parse_args(argv)

    from galinear import Algebra
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
            timings = round_robin(
                {
                    "generated": lambda: algebra.gp(a, b, method="generated"),
                    "table": lambda: algebra.gp(a, b, method="table"),
                    "table_1thread": Contender(lambda: algebra.gp(a, b, method="table"), threads=1),
                    "kernel": lambda: kernel(a, b, out),
                    "einsum": lambda: np.einsum("bi,bj,ijk->bk", a, b, cayley, optimize=True),
                },
                args.repeats,
            )
            best = {name: t.best for name, t in timings.items()}
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
    meta = metadata(
        command_line(__file__, argv, make_target="bench-codegen"), packages=("numpy", "numba"),
        note="one run, methods interleaved, best of repeats; shared machine, so compare ratios, not absolute times",
        generated_wins_at_n=wins, generated_kernel_wins_at_n=kernel_wins,
    )
    table = markdown_table(
        ["dtype", "n", "generated ms", "table ms", "table 1 thread ms", "kernel ms", "einsum ms", "table / generated",
         "table 1 thread / generated", "table / kernel", "table 1 thread / kernel", "einsum / generated",
         "first call generated s", "first call table s"],
        ([r["dtype"], r["n"], r["generated_ms"], r["table_ms"], r["table_1thread_ms"], r["kernel_ms"], r["einsum_ms"],
          ratio(r["table_over_generated"]), ratio(r["table_1thread_over_generated"]), ratio(r["table_over_kernel"]),
          ratio(r["table_1thread_over_kernel"]), ratio(r["einsum_over_generated"], 1), r["first_call_generated_s"],
          r["first_call_table_s"]] for r in rows),
        formats={"generated ms": ".3f", "table ms": ".3f", "table 1 thread ms": ".3f", "kernel ms": ".3f",
                 "einsum ms": ".3f", "first call generated s": ".2f", "first call table s": ".2f"},
    )
    lines = [
        "# Generated vs table-driven kernels (geometric product, Euclidean Cl(n))",
        "",
        header(meta),
        "",
        f"Batch {args.batch} rows, best of {args.repeats} interleaved repeats (shared machine: read the ratios). "
        "`generated` / `table`: `Algebra(n).gp(..., method=...)`; `kernel`: the generated kernel called directly; "
        "`einsum`: numpy over the dense Cayley tensor. Ratios > 1 mean the generated kernel is faster.",
        "",
        table,
        "",
        f"Through `Algebra.gp` (generated path including the core's input checks), generated beats the table "
        f"kernel (default threads and 1 thread, both dtypes) at n = {wins}.",
        f"Kernel against kernel (generated kernel called directly vs `Algebra.gp(method='table')`): n = {kernel_wins}.",
        "",
    ]
    write_results(Path(args.out) / "bench_codegen", {"meta": meta, "rows": rows}, "\n".join(lines))
    print("\n".join(lines[-3:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
