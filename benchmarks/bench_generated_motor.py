"""The generated PGA motor layer against the hand-written galinear.nn.motors, side by side.

Run: ``make bench-generated-motor`` (= ``.venv/bin/python benchmarks/bench_generated_motor.py``).
Writes benchmarks/results/bench_generated_motor.{md,json}.

One learned bivector B (6 parameters) moves N points (N, 3) by the motor exp(B):

* motors: ``galinear.nn.motors``: ``point_coordinates(sandwich(motor_exp(B), point(xyz)))``
  (dense (..., 16) multivectors, products by the Cayley table in ``einsum``);
* generated torch: ``galinear.nn.generated.move_points(B, xyz, backend="torch")``, the program
  ``galinear.compile`` generates from ``M = B.exp(); M * x * ~M`` printed as torch operations;
* generated numba: the same with ``backend="numba"``: the generated numba kernel and its generated
  backward in one ``torch.autograd.Function``;
* each of the two generated backends as the fused program (``program="fused"``: exp and sandwich in
  one generated program, per point) and staged (``program="staged"``, the layer's default for one
  bivector: the generated ``B.exp()`` once, then the generated ``M * x * ~M`` per point).

Measures: the forward under ``torch.no_grad()``, and forward + backward of ``out.square().sum()``
with respect to B (the points need no gradient), for N = 1,000 and 100,000, float32 and float64.
Times: seconds per call, the best of --repeats round-robin samples after a warm-up (every repeat
times every contender once, so that load drifts hit all alike); a sample loops the call until it
lasts at least 20 ms. Ratios: motors / generated (above 1: the generated layer is faster). The
outputs and gradients of all three are compared before timing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, command_line, header, markdown_table, metadata, ratio, round_robin,  # noqa: E402
                     write_results)
from galinear.nn import motors  # noqa: E402
from galinear.nn.generated import kernels, move_points  # noqa: E402

#: Shortest duration of one timing sample (the call is repeated in a loop until it is reached).
SAMPLE_SECONDS = 0.02
SIZES = (1_000, 100_000)
DTYPES = ("float32", "float64")


def reference(B, xyz):
    return motors.point_coordinates(motors.sandwich(motors.motor_exp(B), motors.point(xyz)))


GENERATED = {f"{backend} {program}": (backend, program)
             for backend in ("torch", "numba") for program in ("fused", "staged")}
CONTENDERS = {"motors": reference}
CONTENDERS.update({name: (lambda B, xyz, b=b, p=p: move_points(B, xyz, backend=b, program=p))
                   for name, (b, p) in GENERATED.items()})


def check(n: int = 257) -> dict:
    """Largest differences of the generated layers from motors (float64): values, gradients."""
    gen = torch.Generator().manual_seed(1)
    b = torch.randn(6, generator=gen, dtype=torch.float64)
    xyz = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    out = {}
    for name, fn in CONTENDERS.items():
        B = b.clone().requires_grad_(True)
        p = xyz.clone().requires_grad_(True)
        y = fn(B, p)
        out[name] = (y.detach(), *torch.autograd.grad(y.square().sum(), [B, p]))
    want = out.pop("motors")
    return {name: max(float((g - w).abs().max()) for g, w in zip(got, want)) for name, got in out.items()}


def time_case(n: int, dtype: str, repeats: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    dt = getattr(torch, dtype)
    B = torch.randn(6, generator=gen, dtype=dt).requires_grad_(True)
    xyz = torch.randn(n, 3, generator=gen, dtype=dt)
    fns = {}
    for name, fn in CONTENDERS.items():
        def forward(fn=fn):
            with torch.no_grad():
                fn(B, xyz)

        def step(fn=fn):
            B.grad = None
            fn(B, xyz).square().sum().backward()

        fns[(name, "forward")] = forward
        fns[(name, "forward + backward")] = step
    best = {key: t.best for key, t in round_robin(fns, repeats, min_sample_seconds=SAMPLE_SECONDS).items()}
    row = {"points": n, "dtype": dtype}
    for (name, measure), seconds in best.items():
        row[f"{name} | {measure} | ms"] = seconds * 1e3
    for measure in ("forward", "forward + backward"):
        for name in GENERATED:
            row[f"motors / {name} | {measure}"] = best[("motors", measure)] / best[(name, measure)]
    return row


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = [
        "## Generated PGA motor layer against galinear.nn.motors",
        "",
        header(meta) + " Tables: benchmarks/results/bench_generated_motor.{md,json}.",
        "",
        "One learned bivector moves N points by its motor; motors: `galinear.nn.motors` (motor_exp, then "
        "the sandwich on (N, 16) points by the Cayley table); torch / numba: "
        "`galinear.nn.generated.move_points` with the generated programs as torch operations, or as numba "
        "kernels with their generated backward in one autograd.Function; fused: the one program generated "
        "from `M = B.exp(); M * x * ~M` (exp per point); staged (the layer's default for one bivector): the "
        "generated `B.exp()` once, then the generated `M * x * ~M` per point. Forward under no_grad; "
        "forward + backward of `out.square().sum()` with respect to the bivector. Best of "
        f"{meta['repeats']} round-robin samples after a warm-up, milliseconds per call. "
        "Ratios motors / generated: above 1, the generated layer is faster.",
        "",
    ]
    if meta.get("provisional"):
        lines += [f"**Provisional**: {meta['provisional']}", ""]

    def generated(row, g, measure):
        return f"{ratio(row[f'motors / {g} | {measure}'], bold=True)} ({row[f'{g} | {measure} | ms']:.3g} ms)"

    lines.append(markdown_table(
        ["N", "dtype", "measure", "motors ms", *(f"motors / {g}" for g in GENERATED)],
        ([f"{row['points']:,}", row["dtype"], measure, row[f"motors | {measure} | ms"],
          *(generated(row, g, measure) for g in GENERATED)]
         for row in result["rows"] for measure in ("forward", "forward + backward")),
        formats={"motors ms": ".3g"}))
    errors = result["check"]
    lines += ["", "Largest difference from motors before timing (float64, values and gradients in B and the "
              "points, 257 points): " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) + "."]
    move, exp, sandwich = kernels("torch")
    lines += [f"Generated programs: fused {move.operations['multiplications']} multiplications and "
              f"{move.operations['additions']} additions per point (exp included); staged: exp "
              f"{exp.operations['multiplications']} multiplications once, sandwich "
              f"{sandwich.operations['multiplications']} multiplications and {sandwich.operations['additions']} "
              "additions per point."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="points per call")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for bench_generated_motor.{md,json}")
    parser.add_argument("--provisional", default=None,
                        help="a note printed above the table (e.g. a shared, loaded machine)")
    args = parser.parse_args(argv)
    for backend in ("torch", "numba"):
        kernels(backend)
    errors = check()
    # numba's first parallel call (its threading layer starting) resets torch's thread count: start it
    # before setting the count for the timed runs.
    move_points(torch.zeros(6, dtype=torch.float64), torch.zeros(max(args.sizes), 3, dtype=torch.float64),
                backend="numba")
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [time_case(n, dtype, args.repeats) for n in args.sizes for dtype in DTYPES]
    arguments = [a for a in (sys.argv[1:] if argv is None else argv)
                 if a != args.provisional and a != "--provisional"]
    result = {
        "meta": metadata(command_line(__file__, arguments), packages=("numpy", "numba", "torch"),
                         repeats=args.repeats, provisional=args.provisional),
        "check": errors,
        "rows": rows,
    }
    text = markdown(result)
    print(text)
    write_results(args.out / "bench_generated_motor", result, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
