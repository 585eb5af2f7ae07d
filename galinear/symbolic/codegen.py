r"""Kernel generator of the shipped operations: prints a :class:`~galinear.symbolic.spec.Program`.

The program goes through the compiler's pipeline: its common subexpressions are shared by the CSE
of :mod:`galinear.symbolic.lowering` (:func:`~galinear.symbolic.lowering.straight_line`) and its
statements printed by :func:`galinear.symbolic.emit.statement_lines` with the expression printer of
every target; only the frame around the body is the shipped kernels' own.

Frames
------
The operations are printed for every target of :func:`galinear.compile` (``galinear codegen --op
... --target``); two targets have a frame of their own here (:data:`FRAMES`), the others print the
program of :func:`lowered` with the compiler's printer (:func:`galinear.compiler.build.op_sources`).

``numba``
    One ``@jit`` function (``galinear._numba.jit``, ``cache=True``) looping over the batch axis
    in blocks of :data:`ROWS_PER_BLOCK` rows: a block is transposed into (width, rows) buffers,
    then the straight-line body (inputs loaded into locals, common subexpressions assigned once,
    one sum per output coefficient) runs over contiguous rows, which LLVM vectorises across the
    batch, and the result is transposed back (:func:`galinear.symbolic.numba_source.print_blocked`,
    the one printer of generated numba source). The file imports only numpy and
    ``galinear._numba``, so numba can cache it on disk.
``torch``
    A function on tensors with any leading shape (``unbind`` the last axis, straight-line
    arithmetic, ``stack``); differentiable by autograd.

The output depends only on the spec (no timestamps, no hash-ordered iteration), so
regenerating a spec gives the same bytes; the tests check this.
"""
from __future__ import annotations

from pathlib import Path

import sympy as sp

from galinear import _io
from galinear.symbolic.emit import ExpressionPrinter, statement_lines
from galinear.symbolic.lowering import straight_line
from galinear.symbolic.numba_source import (
    BODY_END,
    BODY_START,
    ROWS_PER_BLOCK,
    Rules,
    print_blocked,
    used_inputs,
)
from galinear.symbolic.spec import KernelSpec, Program, shipped_specs

__all__ = ["FRAMES", "generate", "write_kernel", "generate_all", "write_rotor_spec", "kernel_path", "GENERATED_ROOT",
           "BODY_START", "BODY_END", "ROWS_PER_BLOCK", "SHIPPED_TARGETS", "module_name", "header", "lowered"]

#: The targets whose kernels of the shipped operations have a frame of their own here (the blocked
#: numba frame of the shipped kernels, the torch frame); the other targets of the compiler's
#: registry print :func:`lowered` with their own printer.
FRAMES = ("numba", "torch")
GENERATED_ROOT = Path(__file__).resolve().parent.parent / "_generated"
_LETTER = {1: "p", -1: "m", 0: "z"}


def module_name(spec: KernelSpec) -> str:
    """``<op>_<metric code>``, the name of the kernel's module (``gp_ppp``; p, m, z: +1, -1, 0)."""
    return f"{spec.op}_{''.join(_LETTER[m] for m in spec.metric)}"


def kernel_path(spec: KernelSpec, target: str, root: Path | None = None) -> Path:
    """Where the kernel of ``spec`` for ``target`` lives under ``root`` (galinear/_generated)."""
    _check_target(target)
    root = GENERATED_ROOT if root is None else Path(root)
    return root / f"{target}_kernels" / f"{module_name(spec)}.py"


def _check_target(target: str) -> None:
    if target not in FRAMES:
        raise ValueError(f"{target!r} has no frame of the shipped kernels; these print {', '.join(FRAMES)} "
                         "(galinear.compiler.build.op_sources prints every target of the compiler)")


def _command(spec: KernelSpec, target: str) -> str:
    p, q, r = spec.signature()
    where = "--n {}".format(spec.n) if (q, r) == (0, 0) else f"--signature {p},{q},{r}"
    out = f"galinear/_generated/{target}_kernels" if target in FRAMES else "DIR"
    return f"galinear codegen --op {spec.op} {where} --target {target} --out {out}"


def header(spec: KernelSpec, target: str, printer: str | None = None) -> str:
    """The docstring at the top of the kernel of ``spec`` for ``target``: the spec, the target, the
    generator and the command that writes it again; ``printer`` names the compiler's printer that
    prints a target without a frame here (its arguments are then listed, in the order it takes them)."""
    if printer is None:
        lines = ["generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)",
                 f"regenerate: {_command(spec, target)}",
                 "            (or `galinear codegen --all` / `make codegen` for every shipped kernel)"]
    else:
        program = spec.program()
        arguments = ", ".join(f"{name} ({len(syms)} coefficients)" for name, syms in program.inputs)
        lines = [f"generator:  {printer} (from galinear.symbolic.spec)",
                 f"arguments:  {arguments}, in this order; out ({len(program.outputs)} coefficients)",
                 f"regenerate: {_command(spec, target)}"]
    return (
        f'"""Generated kernel: {spec.describe()}.\n\n'
        f"spec:       KernelSpec(op={spec.op!r}, metric={spec.metric!r})\n"
        f"target:     {target}\n"
        + "".join(f"{line}\n" for line in lines)
        + "\nDo not edit by hand.\n"
        '"""\n'
    )


def _unit(c) -> str:
    # integer constants would promote float32 arithmetic to float64 inside numba
    raise ValueError(f"generated expression has the numeric constant {c}; the generator only emits +-1 sums")


#: The printer of the shipped kernels: galinear.compile's, with the terms of each sum in the
#: order the kernels have always added them.
_PRINTER = ExpressionPrinter(_unit, ordered=True)


def _lowered(program: Program):
    """The spec's program with its common subexpressions shared (the compiler's CSE)."""
    assignments = [(sym, e) for stage in program.stages for sym, e in stage]
    return straight_line(program.inputs, assignments, program.outputs)


def lowered(spec: KernelSpec):
    """The program of ``spec`` for the compiler's printers: its common subexpressions shared by the
    compiler's CSE, and every intermediate named in the private namespace those printers check
    (:func:`galinear.symbolic.emit.private_names`)."""
    program = spec.program()
    rename = {sym: sp.Symbol(f"_{sym}") for stage in program.stages for sym, _ in stage}
    assignments = [(rename[sym], e.xreplace(rename)) for stage in program.stages for sym, e in stage]
    outputs = [sp.sympify(e).xreplace(rename) for e in program.outputs]
    return straight_line(program.inputs, assignments, outputs, prefix="_c")


def _torch_source(spec: KernelSpec, program: Program) -> str:
    lowered = _lowered(program)
    used = used_inputs(lowered)
    args = [name for name, _ in program.inputs]
    widths = {name: len(syms) for name, syms in program.inputs}
    lines = [header(spec, "torch"), "import torch", "", "", f"def kernel({', '.join(args)}):"]
    lines.append(f'    """{spec.describe()}; tensors with any leading shape, last axis as documented."""')
    for name in args:
        lines.append(f"    if {name}.shape[-1] != {widths[name]}:")
        lines.append(
            f"        raise ValueError(f\"{name} must have {widths[name]} entries on its last axis, "
            f"got {{{name}.shape[-1]}}\")"
        )
    for name, syms in program.inputs:
        targets = [str(s) if s in used else "_" for s in syms]
        lines.append(f"    ({', '.join(targets)},) = torch.unbind({name}, dim=-1)")
    lines += [f"    {ln}" for ln in statement_lines(lowered, _PRINTER, Rules)]
    (_, outputs), = lowered.outputs
    outs = []
    if any(e == 0 for e in outputs):
        reference = " + ".join(f"{name}[..., 0]" for name in args)
        lines.append(f"    zero = torch.zeros_like({reference})")
    for col, e in enumerate(outputs):
        if e == 0:
            outs.append("zero")
        else:
            lines.append(f"    o{col} = {_PRINTER(e)}")
            outs.append(f"o{col}")
    lines.append(f"    return torch.stack(({', '.join(outs)},), dim=-1)")
    lines.append("")
    return "\n".join(lines)


def generate(spec: KernelSpec, target: str = "numba") -> str:
    """Source text of the kernel for ``spec`` in the frame of ``target`` (one of :data:`FRAMES`)."""
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"spec must be a KernelSpec, got {type(spec).__name__}")
    _check_target(target)
    program = spec.program()
    if target == "numba":
        return print_blocked(_lowered(program), header(spec, "numba"), spec.describe(), _PRINTER)
    return _torch_source(spec, program)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _io.atomic_write_text(path, text)


def write_kernel(spec: KernelSpec, target: str, out_dir) -> Path:
    """Generate and write ``<out_dir>/<op>_<metric code>.py`` atomically; returns the path.

    The file is rewritten only when its bytes change, so numba's disk cache stays valid.
    """
    text = generate(spec, target)
    out_dir = Path(out_dir)
    path = out_dir / f"{module_name(spec)}.py"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return path
    if not (out_dir / "__init__.py").exists() and out_dir.resolve().parent == GENERATED_ROOT:
        _atomic_write(out_dir / "__init__.py", f'"""Generated {target} kernels (see galinear._generated)."""\n')
    _atomic_write(path, text)
    return path


def write_rotor_spec(root=None) -> Path:
    """Write ``<root>/rotor_spec.py`` from :mod:`galinear.symbolic.rotor_maths` (only if it changed)."""
    from galinear.symbolic import rotor_maths

    path = (GENERATED_ROOT if root is None else Path(root)) / "rotor_spec.py"
    text = rotor_maths.generate()
    if not (path.exists() and path.read_text(encoding="utf-8") == text):
        _atomic_write(path, text)
    return path


#: Targets whose kernels are shipped in galinear/_generated (nothing at run time uses torch kernels).
SHIPPED_TARGETS = ("numba",)


def generate_all(root=None, targets=SHIPPED_TARGETS, progress=None) -> list[Path]:
    """Regenerate the rotor spec and every shipped kernel (:func:`~galinear.symbolic.spec.shipped_specs`)."""
    root = GENERATED_ROOT if root is None else Path(root)
    paths = [write_rotor_spec(root)]
    if progress is not None:
        progress(paths[0])
    for spec in shipped_specs():
        for target in targets:
            path = write_kernel(spec, target, root / f"{target}_kernels")
            if progress is not None:
                progress(path)
            paths.append(path)
    return paths
