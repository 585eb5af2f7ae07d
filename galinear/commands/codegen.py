"""`galinear codegen`: write straight-line kernels generated from symbolic specs or expressions.

``--op`` writes the kernel of one of the six shipped operations for any target of the registry
:data:`galinear.compiler.targets.TARGETS` (:func:`galinear.compiler.build.op_sources`: the shipped
kernels' own frame for numba and torch, the compiler's printer for the others); ``--expr`` compiles
an expression of the user's (``"M * x * ~M"``, parsed with :mod:`ast`, never evaluated as Python)
with :func:`galinear.compile` for any of those targets; ``--all`` regenerates the shipped kernels
(``make codegen``). ``--help`` lists the registered targets, read from the registry when the help is
shown.
"""
import argparse
import re

from galinear.commands._report import fail

HELP = ("generate straight-line kernels for any registered target: --op for the shipped operations, --expr "
        "for any expression of multivectors, --all for the kernels shipped in galinear/_generated")

OPS = ("gp", "op", "lc", "rc", "sandwich", "sandwich2")
#: Largest n of --n and --signature (2**n coefficients per multivector, 4**n products).
MAX_N = 8

EPILOG = """examples:
  galinear codegen --op gp --n 3 --print
  galinear codegen --op sandwich --signature 3,0,1 --target c --out kernels
  galinear codegen --expr "M * x * ~M" --input M=even --input x=1 --signature 3,0,1 --target c --out kernels
  galinear codegen --expr "exp(B) * x * ~exp(B)" --input B=2 --input x=1 --n 3 --grad --verify

--input name=pattern: a grade (3), grades (0,2), even, odd, full, or blade names (e12,e13).
exit status: 0 done; 1 --verify found a kernel that differs from the references; 2 bad input
(or an error named on one line)."""


def registered_targets() -> tuple:
    """:data:`galinear.compiler.targets.TARGETS`, the one list of targets. The registry module
    imports only the standard library, but importing it by name runs ``galinear/compiler/__init__.py``,
    which loads the whole compiler (sympy, seconds); so unless the compiler is loaded already, the
    registry's file is run on its own, under a private name."""
    import importlib.util
    import sys
    from pathlib import Path

    loaded = sys.modules.get("galinear.compiler.targets")
    if loaded is not None:
        return loaded.TARGETS
    path = Path(__file__).resolve().parent.parent / "compiler" / "targets" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_galinear_target_registry", path) if path.is_file() else None
    if spec is None or spec.loader is None:  # not a plain file (a zipped install): the import by name
        from galinear.compiler.targets import TARGETS

        return TARGETS
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TARGETS


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills ``{targets}`` in an option's help with the registered targets when the help is shown."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action)
        return text.replace("{targets}", ", ".join(registered_targets())) if "{targets}" in text else text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = _HelpFormatter
    parser.add_argument("--op", choices=OPS, help="shipped operation to generate")
    parser.add_argument("--expr", metavar="TEXT",
                        help='an expression of the inputs, e.g. "M * x * ~M" (operators * ^ | << >> & @ ~ + - / **, '
                             "functions exp inv sqrt norm dual undual reverse grade, x(k) for grade parts)")
    parser.add_argument("--input", action="append", metavar="NAME=PATTERN",
                        help="with --expr: an input and what it holds (repeat for each input, in argument order)")
    parser.add_argument("--n", type=int, help=f"Euclidean Cl(n), 1 <= n <= {MAX_N}")
    # "-1,0,0" reads as a value (and is refused by its check), not as an unknown option
    parser._negative_number_matcher = re.compile(r"^-[0-9][0-9,]*$")
    parser.add_argument("--signature", help="p,q,r instead of --n (clifford's order: r null, p positive, q negative)")
    parser.add_argument("--target", default="numba",
                        help="kernel language, one of the registered targets: {targets} (default numba; for --op "
                             "and --expr alike)")
    parser.add_argument("--grad", action="store_true", help="with --expr: also generate the backward kernel")
    parser.add_argument("--max-terms", type=int, default=None, metavar="N",
                        help="with --expr: refuse the compile once its traced products hold more than N terms "
                             "(default about two minutes of compiling; 0: no bound)")
    parser.add_argument("--name", default=None,
                        help="with --expr: name of the generated function and files (default expression)")
    parser.add_argument("--out", help="output folder (--op: <op>_<metric code>.py, or .c and .h for c; --expr: "
                                      "<name>.py, or <name>.c and <name>.h; plus <name>_backward.* with --grad)")
    parser.add_argument("--all", action="store_true", help="regenerate every kernel shipped in galinear/_generated")
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the source instead of writing it")
    parser.add_argument("--verify", action="store_true",
                        help="with --expr: compare the kernel with the numeric galinear.MultiVector evaluation (and "
                             "clifford) on random inputs, print the table; exit 1 if it differs")


def _signature(args) -> tuple:
    """(p, q, r) from --n or --signature, its size checked before anything is built."""
    from galinear.compiler.expression import parse_signature

    if (args.n is None) == (args.signature is None):
        raise ValueError("give exactly one of --n N or --signature p,q,r")
    if args.signature is not None:
        return parse_signature(args.signature, MAX_N, "--signature")
    if args.n < 1:
        raise ValueError(f"--n must be at least 1, got {args.n}")
    if args.n > MAX_N:
        raise ValueError(f"--n {args.n} is too large; kernels are generated for 1 <= n <= {MAX_N}")
    return args.n, 0, 0


def run(args) -> int:
    targets = registered_targets()
    if args.target not in targets:
        return fail("codegen", f"unknown --target {args.target!r}; the registered targets are {', '.join(targets)}")
    if args.expr is not None:
        return _run_expression(args)
    from galinear.blades import metric_from_signature
    from galinear.symbolic.codegen import FRAMES, generate_all, module_name, write_kernel
    from galinear.symbolic.spec import KernelSpec

    only_expr = [flag for flag, given in (("--input", args.input), ("--grad", args.grad), ("--name", args.name),
                                          ("--verify", args.verify), ("--max-terms", args.max_terms is not None))
                 if given]
    if args.all:
        if args.op or args.n is not None or args.signature or args.out or only_expr:
            return fail("codegen", "--all regenerates the shipped kernels; do not combine it with "
                        "--op/--n/--signature/--out/--input/--grad/--name/--verify")
        paths = generate_all(progress=lambda path: print(f"wrote {path}"))
        print(f"{len(paths)} kernel files up to date")
        return 0
    if not args.op:
        return fail("codegen", "give --op (one of " + ", ".join(OPS) + "), --expr TEXT, or --all")
    if only_expr:
        return fail("codegen", f"{', '.join(only_expr)} go with --expr; --op writes the shipped operation's kernel")
    try:
        spec = KernelSpec(args.op, metric_from_signature(*_signature(args)))
        if args.print_only:
            for _, text in _op_sources(spec, args.target):
                print(text, end="" if text.endswith("\n") else "\n")
            return 0
        if not args.out:
            raise ValueError("give --out DIR (or --print)")
        _check_out_folder(args.out)
        try:
            if args.target in FRAMES:  # rewritten only when its bytes change (numba's disk cache stays valid)
                print(f"wrote {write_kernel(spec, args.target, args.out)}")
            else:
                _write(args.out, module_name(spec), _op_sources(spec, args.target))
        except OSError as exc:
            raise ValueError(f"cannot write into --out {args.out}: {exc.strerror or exc}; choose a writable folder") from None
    except ValueError as exc:
        return fail("codegen", str(exc))
    return 0


def _op_sources(spec, target: str) -> list:
    """(suffix, text) of each file of the kernel of ``spec`` for ``target``."""
    from galinear.compiler.build import op_sources

    sources = op_sources(spec, target)
    return _sources(target, [("", sources.header, sources.text)])


def _run_expression(args) -> int:
    """--expr: parse, check every size, then build (or compile and verify) and print or write."""
    import keyword
    import sys

    if args.op or args.all:
        return fail("codegen", "give --expr or --op (or --all), not both")
    if args.print_only and args.out:
        return fail("codegen", "give --print or --out DIR, not both")
    if not (args.print_only or args.out or args.verify):
        return fail("codegen", "give --print, --out DIR or --verify (or several: --out DIR --verify)")
    name = "expression" if args.name is None else args.name
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or not name.isascii():
        return fail("codegen", f"--name {name!r} must be an ASCII identifier that does not start with '_'")
    from galinear.compiler.expression import parse_expression, parse_inputs

    signature = _signature(args)  # ValueErrors: one line, exit 2 (the command boundary)
    from galinear.symbolic.trace import MAX_TRACE_TERMS

    if args.max_terms is not None and args.max_terms < 0:
        return fail("codegen", f"--max-terms must be 0 (no bound) or a positive count, got {args.max_terms}")
    max_terms = MAX_TRACE_TERMS if args.max_terms is None else (args.max_terms or None)
    inputs = parse_inputs(args.input)
    func = parse_expression(args.expr, list(inputs))
    unused = [n for n in inputs if n not in func.used_inputs]
    if unused:
        return fail("codegen", f"--input {', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not used by "
                    f"--expr {args.expr!r}; remove {'it' if len(unused) == 1 else 'them'} or use "
                    f"{'it' if len(unused) == 1 else 'them'} in the expression")
    if args.out:
        _check_out_folder(args.out)

    from galinear.blades import metric_from_signature
    from galinear.compiler import compile as compile_kernel
    from galinear.compiler.build import build
    from galinear.core import Algebra

    kernel = None
    try:
        if args.verify:
            kernel = compile_kernel(func, Algebra(*signature), inputs, target=args.target, grad=args.grad, name=name,
                                    max_terms=max_terms)
            forward = kernel[0] if args.grad else kernel
            files = [("", forward.header, forward.source)]
            if forward.backward is not None:
                files.append(("_backward", forward.backward.header, forward.backward.source))
        else:
            built = build(func, metric_from_signature(*signature), inputs, args.target, grad=args.grad, name=name,
                          max_terms=max_terms)
            files = [("", built.header, built.source), ("_backward", built.backward_header, built.backward_source)]
    except RuntimeError as exc:  # a missing C compiler, triton without a GPU or its interpreter
        return fail("codegen", str(exc))
    sources = _sources(args.target, files)
    if args.print_only:
        for _, text in sources:
            print(text, end="" if text.endswith("\n") else "\n")
    if args.out:
        _write(args.out, name, sources)
    if kernel is not None:
        report = kernel.verify()
        print(report.table())
        if not report.ok:
            print("galinear codegen: the kernel differs from the references (exit status 1)", file=sys.stderr)
            return 1
    return 0


def _sources(target: str, files) -> list:
    """(suffix, text) of each generated file from (suffix, header, source): the header first for C."""
    from galinear.compiler.targets import target as target_module

    ext = target_module(target).FILE_SUFFIX
    out = []
    for suffix, header, source in files:
        if source is None:
            continue
        if header is not None:
            out.append((f"{suffix}.h", header))
        out.append((f"{suffix}{ext}", source))
    return out


def _write(out, name: str, sources) -> None:
    from pathlib import Path

    from galinear._io import atomic_write_text

    for suffix, text in sources:
        path = Path(out) / f"{name}{suffix}"
        try:
            atomic_write_text(str(path), text)
        except OSError as exc:
            raise ValueError(f"cannot write {path}: {exc.strerror or exc}; choose a writable --out folder") from None
        print(f"wrote {path}")


def _check_out_folder(out) -> None:
    """Create ``out`` if needed and make sure a file can be written there, before generating."""
    import os
    import tempfile
    from pathlib import Path

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; give a folder (it is created if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".galinear-write-test-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ValueError(
            f"cannot write into --out {out} ({reason}); choose a folder you can write to"
        ) from None
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--out {out} is not writable; choose a folder you can write to")
