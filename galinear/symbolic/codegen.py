r"""Kernel generator: prints a :class:`~galinear.symbolic.spec.Program` as Python source.

Targets
-------
``numba``
    One ``@jit`` function (``galinear._numba.jit``, ``cache=True``) looping over the batch axis
    in blocks of :data:`ROWS_PER_BLOCK` rows: a block is transposed into (width, rows) buffers,
    then the straight-line body (inputs loaded into locals, common subexpressions from
    ``sympy.cse`` assigned once, one sum per output coefficient) runs over contiguous rows, which
    LLVM vectorises across the batch, and the result is transposed back. The file imports only
    numpy and ``galinear._numba``, so numba can cache it on disk.
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
from galinear.symbolic.spec import KernelSpec, Program, shipped_specs

__all__ = ["TARGETS", "generate", "write_kernel", "generate_all", "write_rotor_spec", "kernel_path", "GENERATED_ROOT"]

TARGETS = ("numba", "torch")
GENERATED_ROOT = Path(__file__).resolve().parent.parent / "_generated"
_LETTER = {1: "p", -1: "m", 0: "z"}


def _module_name(spec: KernelSpec) -> str:
    return f"{spec.op}_{''.join(_LETTER[m] for m in spec.metric)}"


def kernel_path(spec: KernelSpec, target: str, root: Path | None = None) -> Path:
    """Where the kernel of ``spec`` for ``target`` lives under ``root`` (galinear/_generated)."""
    _check_target(target)
    root = GENERATED_ROOT if root is None else Path(root)
    return root / f"{target}_kernels" / f"{_module_name(spec)}.py"


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")


def _command(spec: KernelSpec, target: str) -> str:
    p, q, r = spec.signature()
    where = "--n {}".format(spec.n) if (q, r) == (0, 0) else f"--signature {p},{q},{r}"
    return f"galinear codegen --op {spec.op} {where} --target {target} --out galinear/_generated/{target}_kernels"


def _header(spec: KernelSpec, target: str) -> str:
    return (
        f'"""Generated kernel: {spec.describe()}.\n\n'
        f"spec:       KernelSpec(op={spec.op!r}, metric={spec.metric!r})\n"
        f"target:     {target}\n"
        f"generator:  galinear.symbolic.codegen (from galinear.symbolic.spec)\n"
        f"regenerate: {_command(spec, target)}\n"
        f"            (or `galinear codegen --all` / `make codegen` for every shipped kernel)\n\n"
        f"Do not edit by hand.\n"
        f'"""\n'
    )


def _cse(assignments, prefix: str):
    """CSE over a list of expressions, deterministic symbol names ``<prefix>0, <prefix>1, ...``."""
    replacements, reduced = sp.cse(
        list(assignments), symbols=sp.numbered_symbols(prefix), order="canonical"
    )
    return replacements, reduced


def _check_constants(expr) -> None:
    bad = [c for c in expr.atoms(sp.Number) if c not in (1, -1)]
    if bad:
        # integer constants would promote float32 arithmetic to float64 inside numba
        raise ValueError(f"generated expression has numeric constants {bad}; the generator only emits +-1 sums")


def _expr(expr) -> str:
    _check_constants(expr)
    return sp.pycode(expr, fully_qualified_modules=False) if expr != 0 else None


def _lower(program: Program):
    """Sequence of ('let', name, code) and the output codes, after CSE per stage."""
    lets = []
    counter = 0
    for stage in program.stages:
        names = [s for s, _ in stage]
        replacements, reduced = _cse([e for _, e in stage], f"c{counter}_")
        counter += 1
        for sym, e in replacements:
            lets.append((str(sym), _expr(e)))
        for sym, e in zip(names, reduced):
            code = _expr(e)
            lets.append((str(sym), code if code is not None else None))
    replacements, reduced = _cse(program.outputs, f"c{counter}_")
    for sym, e in replacements:
        lets.append((str(sym), _expr(e)))
    outputs = [_expr(e) for e in reduced]
    return lets, outputs


def _used_symbols(program: Program) -> set:
    used = set()
    for stage in program.stages:
        for _, e in stage:
            used |= {str(s) for s in sp.sympify(e).free_symbols}
    for e in program.outputs:
        used |= {str(s) for s in sp.sympify(e).free_symbols}
    return used


#: Rows per block in the numba kernels: each block is transposed into (width, ROWS) buffers so
#: that the straight-line body runs over contiguous rows and LLVM vectorises it across the batch.
ROWS_PER_BLOCK = 64
BODY_START = "# --- straight-line body ---"
BODY_END = "# --- end of body ---"


def _numba_source(spec: KernelSpec, program: Program) -> str:
    lets, outputs = _lower(program)
    used = _used_symbols(program)
    args = [name for name, _ in program.inputs]
    widths = {name: len(syms) for name, syms in program.inputs}
    width_out = len(program.outputs)
    block = ROWS_PER_BLOCK
    lines = [_header(spec, "numba"), "import numpy as np", "", "from galinear._numba import jit", "", "",
             "@jit", f"def kernel({', '.join(args)}, out):"]
    lines.append(f'    """{spec.describe()}; see galinear._generated for the signature."""')
    checks = [f"{name}.shape[1] != {widths[name]}" for name in args] + [f"out.shape[1] != {width_out}"]
    lines.append(f"    if {' or '.join(checks)}:")
    lines.append(
        "        raise ValueError(\"wrong row widths: expected "
        + ", ".join(f"{n}: {widths[n]}" for n in args)
        + f", out: {width_out}\")"
    )
    batch = [f"{name}.shape[0] != out.shape[0]" for name in args]
    lines.append(f"    if {' or '.join(batch)}:")
    lines.append("        raise ValueError(\"all arguments need the same batch size (axis 0)\")")
    lines.append("    nrows = out.shape[0]")
    for name in args:
        lines.append(f"    {name}_t = np.empty(({widths[name]}, {block}), dtype={name}.dtype)")
    lines.append(f"    out_t = np.empty(({width_out}, {block}), dtype=out.dtype)")
    lines.append(f"    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan")
    lines.append(f"    for start in range(0, nrows, {block}):")
    lines.append(f"        count = min({block}, nrows - start)")
    lines.append("        for row in range(count):")
    for name in args:
        lines.append(f"            for col in range({widths[name]}):")
        lines.append(f"                value = {name}[start + row, col]")
        lines.append(f"                {name}_t[col, row] = value")
        lines.append("                probe += value - value")
    lines.append("        for row in range(count):")
    lines.append(f"            {BODY_START}")
    for name, syms in program.inputs:
        for col, sym in enumerate(syms):
            if str(sym) in used:
                lines.append(f"            {sym} = {name}_t[{col}, row]")
    for name, code in lets:
        if code is None:
            continue
        lines.append(f"            {name} = {code}")
    for col, code in enumerate(outputs):
        lines.append(f"            out_t[{col}, row] = {0 if code is None else code}")
    lines.append(f"            {BODY_END}")
    lines.append("        for row in range(count):")
    lines.append(f"            for col in range({width_out}):")
    lines.append("                out[start + row, col] = out_t[col, row]")
    lines.append("    return probe == 0")
    lines.append("")
    return "\n".join(lines)


def _torch_source(spec: KernelSpec, program: Program) -> str:
    lets, outputs = _lower(program)
    used = _used_symbols(program)
    args = [name for name, _ in program.inputs]
    widths = {name: len(syms) for name, syms in program.inputs}
    lines = [_header(spec, "torch"), "import torch", "", "", f"def kernel({', '.join(args)}):"]
    lines.append(f'    """{spec.describe()}; tensors with any leading shape, last axis as documented."""')
    for name in args:
        lines.append(f"    if {name}.shape[-1] != {widths[name]}:")
        lines.append(
            f"        raise ValueError(f\"{name} must have {widths[name]} entries on its last axis, "
            f"got {{{name}.shape[-1]}}\")"
        )
    for name, syms in program.inputs:
        targets = [str(s) if str(s) in used else "_" for s in syms]
        lines.append(f"    ({', '.join(targets)},) = torch.unbind({name}, dim=-1)")
    for name, code in lets:
        if code is None:
            continue
        lines.append(f"    {name} = {code}")
    outs = []
    if any(code is None for code in outputs):
        reference = " + ".join(f"{name}[..., 0]" for name in args)
        lines.append(f"    zero = torch.zeros_like({reference})")
    for col, code in enumerate(outputs):
        if code is None:
            outs.append("zero")
        else:
            lines.append(f"    o{col} = {code}")
            outs.append(f"o{col}")
    lines.append(f"    return torch.stack(({', '.join(outs)},), dim=-1)")
    lines.append("")
    return "\n".join(lines)


def generate(spec: KernelSpec, target: str = "numba") -> str:
    """Source text of the kernel for ``spec`` and ``target`` (``"numba"`` or ``"torch"``)."""
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"spec must be a KernelSpec, got {type(spec).__name__}")
    _check_target(target)
    program = spec.program()
    if target == "numba":
        return _numba_source(spec, program)
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
    path = out_dir / f"{_module_name(spec)}.py"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return path
    if not (out_dir / "__init__.py").exists() and out_dir.resolve().parent == GENERATED_ROOT:
        _atomic_write(out_dir / "__init__.py", f'"""Generated {target} kernels (see galinear._generated)."""\n')
    _atomic_write(path, text)
    return path


def write_rotor_spec(root=None) -> Path:
    """Write ``<root>/rotor_spec.py`` from :mod:`galinear.symbolic.rotor_spec` (only if it changed)."""
    from galinear.symbolic import rotor_spec

    path = (GENERATED_ROOT if root is None else Path(root)) / "rotor_spec.py"
    text = rotor_spec.generate()
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
