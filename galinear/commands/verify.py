"""`galinear verify`: run the exact proofs shipped in galinear.proofs and print a table, or prove
an identity of the user's (``--identity "lhs == rhs"``) in the signatures given."""
import argparse
import re

from galinear.commands._report import fail

HELP = ("run the exact symbolic proofs (galinear.proofs) and print a table (identity, n range, result, seconds); "
        "--identity proves or refutes an identity of your own")

EPILOG = """examples:
  galinear verify --only <proof name>
  galinear verify --identity "a << (b ^ c) == (a << b) * c - (a << c) * b" --input a=1 --input b=1 --input c=1 \
      --signatures 3,0,0 3,0,1 4,1,0

--identity: one top-level == between two expressions of the inputs (operators * ^ | << >> & @ ~ + - / **,
functions exp inv sqrt norm dual undual reverse grade, x(k) for grade parts); --input name=pattern: a grade
(1), grades (0,2), even, odd, full, or blade names (e12,e13); --signatures p,q,r ... or all (every
signature with p+q+r <= --max-n).
--proofs-dir DIR: a trust boundary. The scripts of DIR run as Python programs with your rights (give only a
folder you trust); one counts as proved only when it exits 0 AND prints galinear's verdict (run_proof's header
and its last line "PROVED: k/k checks exact, S s"); exit 0 without it is reported as NO VERDICT.
exit status: 0 every proof (or every signature) proved; 1 one failed, timed out, gave no verdict, was refuted
or undecided; 2 bad input."""

#: Largest --n accepted. A dense product in Cl(n) has 4**n terms, so every n above a proof's
#: default multiplies its time by at least 4; the defaults (n = 4..7) take a few minutes in all.
N_LIMIT = 8
#: Default seconds of a shipped proof, and of the exact step of --identity per signature.
PROOF_TIMEOUT = 1800.0
IDENTITY_TIMEOUT = 60.0
#: Largest --timeout (about 116 days; the operating system's timers refuse far larger ones).
MAX_TIMEOUT = 1e7


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--n", type=int, default=None,
                        help=f"largest n for every proof, at most {N_LIMIT} (default: each script's own bound)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="run only this proof (script name without .py; repeatable)")
    parser.add_argument("--proofs-dir", default=None, metavar="DIR",
                        help="folder with proof scripts of your own (default: the proofs shipped in galinear.proofs). "
                             "Trust boundary: verify RUNS every script of DIR with Python, as you, with your rights; "
                             "give only a folder whose scripts you would run yourself. A script counts as proved only "
                             "when it exits 0 and prints galinear's own verdict (galinear.symbolic.proof_scripts.run_proof): "
                             "the line 'proof: IDENTITY (n = N_MIN..N)' with the IDENTITY it defines, then as its last "
                             "line 'PROVED: k/k checks exact, S s' with k >= 1")
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"seconds allowed per proof (default {PROOF_TIMEOUT:g}); with --identity, to the exact "
                             f"step of each signature (default {IDENTITY_TIMEOUT:g})")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each proof's log")
    parser.add_argument("--identity", metavar="TEXT",
                        help='prove or refute "lhs == rhs" of your own in each --signatures '
                             "(instead of the shipped proofs)")
    parser.add_argument("--input", action="append", metavar="NAME=PATTERN",
                        help="with --identity: an input and what it holds (repeat for each input)")
    parser.add_argument("--signatures", nargs="+", metavar="P,Q,R",
                        help="with --identity: the signatures, e.g. 3,0,0 3,0,1 4,1,0, or all")
    parser.add_argument("--max-n", type=int, default=4,
                        help=f"with --signatures all: the largest p+q+r (default 4, at most {N_LIMIT})")


def _check_timeout(timeout) -> None:
    import math

    if timeout is not None and (not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT):
        raise ValueError(f"--timeout must be a number of seconds > 0 and at most {MAX_TIMEOUT:g}, got {timeout}")


def _run_identity(args) -> int:
    """--identity: parse, check, prove in each signature, print the table."""
    from galinear.compiler.expression import parse_identity, parse_inputs, parse_signature

    mixed = [flag for flag, given in (("--n", args.n is not None), ("--only", args.only),
                                      ("--proofs-dir", args.proofs_dir), ("--verbose", args.verbose)) if given]
    if mixed:
        raise ValueError(f"{', '.join(mixed)} select shipped proofs; do not combine them with --identity")
    if not args.signatures:
        raise ValueError("give --signatures p,q,r ... (e.g. --signatures 3,0,0 3,0,1) or --signatures all")
    if not 1 <= args.max_n <= N_LIMIT:
        raise ValueError(f"--max-n must be in 1..{N_LIMIT}, got {args.max_n}")
    if args.signatures == ["all"]:
        signatures = "all"
    else:
        signatures = [parse_signature(text, N_LIMIT, "--signatures") for text in args.signatures]
    inputs = parse_inputs(args.input)
    func = parse_identity(args.identity, list(inputs))
    from galinear.compiler.identities import prove

    report = prove(func, inputs, signatures, timeout=IDENTITY_TIMEOUT if args.timeout is None else args.timeout,
                   max_n=args.max_n)
    print(report.table())
    return 0 if report.holds is True else 1


_REQUIRED = ("IDENTITY", "N_MIN", "N_DEFAULT")
_SHAPE = ("a proof script defines IDENTITY = '...' (one line), N_MIN and N_DEFAULT (integers), prove(n_max, log), "
          "and ends with raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove)); see galinear.symbolic.proof_scripts")


def _constants(path):
    """IDENTITY, N_MIN and N_DEFAULT of a proof script, read without running it; ValueError
    naming the file and line when the script cannot be parsed or a value is not a literal."""
    import ast

    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read as UTF-8 Python ({error}); fix the file or remove it "
                         "from the proofs folder") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as error:
        raise ValueError(f"{path}, line {error.lineno}: syntax error ({error.msg}); fix the script or remove it "
                         "from the proofs folder") from None
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in _REQUIRED:
                try:
                    values[name] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    raise ValueError(f"{path}, line {node.lineno}: {name} must be a literal written in the script "
                                     f"(verify reads it without running the script), not the expression "
                                     f"{ast.get_source_segment(source, node.value)!r}") from None
    if not values:
        return values
    kinds = {"IDENTITY": str, "N_MIN": int, "N_DEFAULT": int}
    for name in _REQUIRED:
        value = values.get(name)
        if name not in values or not isinstance(value, kinds[name]) or isinstance(value, bool):
            raise ValueError(f"{path}: {name} is {'missing' if name not in values else repr(value)}; {_SHAPE}")
    if not 1 <= values["N_MIN"] <= values["N_DEFAULT"]:
        raise ValueError(f"{path}: N_MIN = {values['N_MIN']} and N_DEFAULT = {values['N_DEFAULT']} must satisfy "
                         "1 <= N_MIN <= N_DEFAULT")
    return values


_VERDICT = re.compile(r"PROVED: (\d+)/(\d+) checks exact, \d+(?:\.\d+)? s")


def verdict_problem(output: str, identity: str, n_min: int, n_max: int):
    """Why the standard output of a proof script that exited 0 is not a proof, or None.

    A proof is the output of :func:`galinear.symbolic.proof_scripts.run_proof`: the header line
    ``proof: IDENTITY (n = N_MIN..N)`` for the identity the script declares and the range asked
    for, and as the last line ``PROVED: k/k checks exact, S s`` with k >= 1. An exit status of 0
    alone proves nothing (a script that only prints its arguments exits 0)."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    header = f"proof: {identity} (n = {n_min}..{n_max})"
    if header not in lines:
        return f"it exited 0 without the header line {header!r} of galinear's proofs"
    match = _VERDICT.fullmatch(lines[-1])
    if match is None or match.group(1) != match.group(2) or int(match.group(1)) < 1:
        return "it exited 0 without ending on galinear's verdict line 'PROVED: k/k checks exact, S s' (k >= 1)"
    return None


def find_proofs(directory=None):
    """Mapping name -> (path, IDENTITY, N_MIN, N_DEFAULT) for every proof script.

    ``directory`` None: the proofs shipped inside the package (:mod:`galinear.proofs`), so an
    installed galinear verifies itself without a source checkout. A folder without any proof
    script, a script that does not parse and a constant that is not a literal raise ValueError
    (naming the folder, or the file and line). Scripts that define none of the three constants
    (helpers) are skipped.
    """
    from pathlib import Path

    import galinear.proofs

    folder = Path(directory) if directory else Path(galinear.proofs.__file__).resolve().parent
    if not folder.is_dir():
        raise ValueError(f"no proofs folder at {folder}; pass --proofs-dir with a folder of proof scripts")
    out = {}
    for path in sorted(p for p in folder.glob("*.py") if p.name != "__init__.py" and p.is_file()):
        constants = _constants(path)
        if constants:
            out[path.stem] = (path, constants["IDENTITY"], constants["N_MIN"], constants["N_DEFAULT"])
    if not out:
        raise ValueError(f"no proof script in {folder}; {_SHAPE}")
    return out


def run(args) -> int:
    import os
    import subprocess
    import sys
    import time

    try:
        _check_timeout(args.timeout)
    except ValueError as exc:
        return fail("verify", str(exc))
    if args.identity is not None:
        return _run_identity(args)
    stray = [flag for flag, given in (("--input", args.input), ("--signatures", args.signatures)) if given]
    if stray:
        return fail("verify", f"{', '.join(stray)} go with --identity \"lhs == rhs\"")
    timeout = PROOF_TIMEOUT if args.timeout is None else args.timeout
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
                capture_output=True, text=True, timeout=timeout, env=env,
            )
            code, log = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            code, log = 124, f"timed out after {timeout:.0f} s"
        seconds = time.perf_counter() - start
        problem = verdict_problem(done.stdout, identity, n_min, n_max) if code == 0 else None
        result = ("NO VERDICT" if problem else "proved") if code == 0 else ("timeout" if code == 124 else "FAILED")
        failed += code != 0 or problem is not None
        rows.append((name, identity, f"{n_min}..{n_max}", result, f"{seconds:.1f}"))
        if args.verbose or code != 0 or problem:
            print(log.rstrip())
        if problem:
            print(f"{path}: not counted as proved: {problem}")
    headers = ("proof", "identity", "n range", "result", "seconds")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(5)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
    print(f"{len(rows) - failed}/{len(rows)} proofs passed")
    return 1 if failed or not rows else 0
