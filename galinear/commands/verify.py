"""`galinear verify`: run the exact proofs shipped in galinear.proofs and print a table."""
import argparse

from galinear.commands._report import fail

HELP = "run the exact symbolic proofs (galinear.proofs) and print a table (identity, n range, result, seconds)"

#: Largest --n accepted. A dense product in Cl(n) has 4**n terms, so every n above a proof's
#: default multiplies its time by at least 4; the defaults (n = 4..7) take a few minutes in all.
N_LIMIT = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None,
                        help=f"largest n for every proof, at most {N_LIMIT} (default: each script's own bound)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="run only this proof (script name without .py; repeatable)")
    parser.add_argument("--proofs-dir", default=None, help="folder with proof scripts of your own (default: the proofs shipped in galinear.proofs)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per proof (default 1800)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each proof's log")


def _constants(path):
    import ast

    values = {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("IDENTITY", "N_MIN", "N_DEFAULT"):
                values[name] = ast.literal_eval(node.value)
    return values


def find_proofs(directory=None):
    """Mapping name -> (path, IDENTITY, N_MIN, N_DEFAULT) for every proof script.

    ``directory`` None: the proofs shipped inside the package (:mod:`galinear.proofs`), so an
    installed galinear verifies itself without a source checkout.
    """
    from pathlib import Path

    import galinear.proofs

    folder = Path(directory) if directory else Path(galinear.proofs.__file__).resolve().parent
    if not folder.is_dir():
        raise ValueError(f"no proofs folder at {folder}; pass --proofs-dir with a folder of proof scripts")
    out = {}
    for path in sorted(p for p in folder.glob("*.py") if p.name != "__init__.py"):
        constants = _constants(path)
        if {"IDENTITY", "N_MIN", "N_DEFAULT"} <= constants.keys():
            out[path.stem] = (path, constants["IDENTITY"], constants["N_MIN"], constants["N_DEFAULT"])
    return out


def run(args) -> int:
    import os
    import subprocess
    import sys
    import time

    try:
        proofs = find_proofs(args.proofs_dir)
    except ValueError as exc:
        return fail("verify", str(exc))
    if args.only:
        unknown = [name for name in args.only if name not in proofs]
        if unknown:
            return fail("verify", f"unknown proof(s) {', '.join(unknown)}; available: {', '.join(proofs)}")
        proofs = {name: proofs[name] for name in args.only}
    if args.n is not None and args.n < 1:
        return fail("verify", "--n must be a positive integer")
    if args.n is not None and args.n > N_LIMIT:
        return fail(
            "verify",
            f"--n {args.n} is too large; the largest accepted is {N_LIMIT}. Each n above a proof's "
            f"default (5..7) multiplies its time by at least 4 (4**n terms per product), so --n {args.n} "
            f"would take at least 4**{args.n - 7} times the default run of a few minutes. "
            "Run without --n for the default bounds, or prove one identity further with --only NAME --n N",
        )
    slow = [name for name, (_, _, _, n_default) in proofs.items() if args.n is not None and args.n > n_default]
    if slow:
        factor = 4 ** max(args.n - proofs[name][3] for name in slow)
        print(
            f"note: --n {args.n} is above the default bound of {', '.join(slow)}; expect at least "
            f"{factor}x their default time (each proof's time is printed as it finishes)",
            file=sys.stderr,
        )
    rows, failed = [], 0
    env = dict(os.environ)
    for number, (name, (path, identity, n_min, n_default)) in enumerate(proofs.items(), 1):
        n_max = n_default if args.n is None else max(args.n, n_min)
        print(f"[{number}/{len(proofs)}] {name}, n = {n_min}..{n_max} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, str(path), "--n", str(n_max)],
                capture_output=True, text=True, timeout=args.timeout, env=env,
            )
            code, log = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            code, log = 124, f"timed out after {args.timeout:.0f} s"
        seconds = time.perf_counter() - start
        result = "proved" if code == 0 else ("timeout" if code == 124 else "FAILED")
        failed += code != 0
        rows.append((name, identity, f"{n_min}..{n_max}", result, f"{seconds:.1f}"))
        if args.verbose or code != 0:
            print(log.rstrip())
    headers = ("proof", "identity", "n range", "result", "seconds")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(5)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
    print(f"{len(rows) - failed}/{len(rows)} proofs passed")
    return 1 if failed else 0
