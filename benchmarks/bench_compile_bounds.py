"""Compiles that used to run without bound: each case in a fresh process, its compile time, peak memory
and the kernel's multiplications, or the refusal and how long it took.

Run: ``.venv/bin/python benchmarks/bench_compile_bounds.py`` (about half a minute). The cases are
those of the compiler's review: inverses of versors and of a full multivector in Cl(4,1),
``~V / (V * ~V)``, ``x * x * x`` of full multivectors of Cl(8) and a 450-fold product of vectors.
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("inv_ab", "inv_abc", "vv", "inv_full", "xxx_cl8", "product_450")


def _case(name: str):
    import galinear
    from galinear.compiler import inv, parse_expression

    cga = galinear.Algebra(4, 1, 0)
    return {
        "inv_ab": ("inv(a * b) in Cl(4,1)", lambda a, b: inv(a * b), cga, {"a": 1, "b": 1}),
        "inv_abc": ("inv(a * b * c) in Cl(4,1)", lambda a, b, c: inv(a * b * c), cga, {"a": 1, "b": 1, "c": 1}),
        "vv": ("~V / (V * ~V) in Cl(4,1), V even", lambda V: ~V / (V * ~V), cga, {"V": "even"}),
        "inv_full": ("inv(a) of a full multivector of Cl(4,1)", lambda a: inv(a), cga, {"a": "full"}),
        "xxx_cl8": ("x * x * x, x full in Cl(8)", lambda x: x * x * x, galinear.Algebra(8), {"x": "full"}),
        "product_450": ("a 450-fold product of vectors in Cl(3)",
                        parse_expression(" * ".join("abc"[i % 3] for i in range(450)), ["a", "b", "c"]),
                        galinear.Algebra(3), {"a": 1, "b": 1, "c": 1}),
    }[name]


def run_one(name: str) -> dict:
    import galinear
    from galinear.compiler import CompileTooLarge

    label, func, algebra, inputs = _case(name)
    start = time.perf_counter()
    try:
        kernel = galinear.compile(func, algebra, inputs, target="numpy", cache=False)
        outcome = {"result": "compiled", "multiplications": kernel.operations["multiplications"],
                   "strategy": kernel.strategy}
    except CompileTooLarge as refused:
        outcome = {"result": "refused", "message": str(refused)}
    outcome.update(case=name, label=label, seconds=time.perf_counter() - start,
                   peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return outcome


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        print(json.dumps(run_one(sys.argv[2])))
        return 0
    print("| case | result | compile s | multiplications | peak MiB (whole process) |")
    print("|---|---|---|---|---|")
    for name in CASES:
        done = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, cwd=ROOT,
                              check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"| {row['label']} | {row['result']} | {row['seconds']:.2f} | {row.get('multiplications', '-')} | "
              f"{row['peak_mib']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
