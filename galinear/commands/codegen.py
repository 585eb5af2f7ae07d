"""`galinear codegen`: write straight-line kernels generated from symbolic specs."""
import argparse

from galinear.commands._report import fail

HELP = "generate straight-line kernels (numba or torch) from symbolic specs; --all regenerates galinear/_generated"

OPS = ("gp", "op", "lc", "rc", "sandwich", "sandwich2")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", choices=OPS, help="operation to generate")
    parser.add_argument("--n", type=int, help="Euclidean Cl(n), 1 <= n <= 8")
    parser.add_argument("--signature", help="p,q,r instead of --n (clifford's order: r null, p positive, q negative)")
    parser.add_argument("--target", choices=("numba", "torch"), default="numba", help="kernel language (default numba)")
    parser.add_argument("--out", help="output folder (the file is <op>_<metric code>.py)")
    parser.add_argument("--all", action="store_true", help="regenerate every kernel shipped in galinear/_generated")
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the source instead of writing it")


def run(args) -> int:
    from galinear.blades import metric_from_signature
    from galinear.symbolic.codegen import generate, generate_all, write_kernel
    from galinear.symbolic.spec import KernelSpec

    if args.all:
        if args.op or args.n is not None or args.signature or args.out:
            return fail("codegen", "--all regenerates the shipped kernels; do not combine it with "
                        "--op/--n/--signature/--out")
        paths = generate_all(progress=lambda path: print(f"wrote {path}"))
        print(f"{len(paths)} kernel files up to date")
        return 0
    if not args.op:
        return fail("codegen", "give --op (one of " + ", ".join(OPS) + ") or --all")
    if (args.n is None) == (args.signature is None):
        return fail("codegen", "give exactly one of --n N or --signature p,q,r")
    try:
        if args.signature is not None:
            try:
                p, q, r = (int(part) for part in args.signature.split(","))
            except ValueError:
                raise ValueError(f"--signature must look like 3,0,1 (p,q,r), got {args.signature!r}") from None
            metric = metric_from_signature(p, q, r)
        else:
            if args.n < 1:
                raise ValueError(f"--n must be at least 1, got {args.n}")
            metric = (1,) * args.n
        spec = KernelSpec(args.op, metric)
        if args.print_only:
            print(generate(spec, args.target), end="")
            return 0
        if not args.out:
            raise ValueError("give --out DIR (or --print)")
        _check_out_folder(args.out)
        try:
            path = write_kernel(spec, args.target, args.out)
        except OSError as exc:
            raise ValueError(f"cannot write into --out {args.out}: {exc.strerror or exc}; choose a writable folder") from None
    except ValueError as exc:
        return fail("codegen", str(exc))
    print(f"wrote {path}")
    return 0


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
