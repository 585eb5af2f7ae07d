"""The Triton target: a ``@triton.jit`` kernel over blocks of rows and a launcher ``kernel(*inputs)``
on contiguous tensors ``(N, k_i)`` of one device; on the CPU with ``TRITON_INTERPRET=1``."""
from __future__ import annotations

import os

from galinear.compiler.targets._runtime import Loaded as _Loaded
from galinear.compiler.targets.numba import Rules as ScalarRules
from galinear.compiler.targets.torch import as_tensors
from galinear.symbolic.emit import (
    array_g_lines,
    constants_line,
    g_orders,
    guard_condition,
    guard_messages,
    statement_lines,
    typed_constants,
)

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules", "require_triton"]

NAME = "triton"
FILE_SUFFIX = ".py"
AUTOGRAD = None  # the generated backward serves torch_function()


class Rules(ScalarRules):
    """Statements on a block of rows: ``tl`` functions; the typed constants ``_one`` and ``_zero`` (so
    ``let`` and ``recip`` read as numba's)."""

    names = {"where": "tl.where", "sqrt": "tl.sqrt", "cos": "tl.cos", "sin": "tl.sin", "abs": "tl.abs",
             "exp": "tl.exp"}

    @staticmethod
    def guard(step, arg, code):
        return [f"bad = tl.where((bad == 0) & ({guard_condition(step, arg)}) & mask, {code}, bad)"]

    @staticmethod
    def sqrt(s, arg, step):
        return [f"{s} = tl.sqrt(tl.maximum({arg}, _zero))"]

    @staticmethod
    def abs(s, arg, step):
        return [f"{s} = tl.abs({arg})"]

    @staticmethod
    def sign(s, arg, step):
        return [f"{s} = tl.where({arg} > 0, _one, tl.where({arg} < 0, -_one, _zero))"]

    @staticmethod
    def g(s, arg, step):
        return [f"{s} = _gfun{step.order}({arg} + _zero)"]


def print_program(program, name: str, header: str) -> str:
    numbers, pr = typed_constants(program)
    ins = [n for n, _ in program.inputs]
    outs = [n for n, _ in program.outputs]
    widths = {n: len(s) for n, s in program.inputs}
    owidths = {n: len(e) for n, e in program.outputs}
    lines = [header, "import torch", "import triton", "import triton.language as tl", "", ""]
    for m in g_orders(program):
        lines += array_g_lines(m, Rules.names, "@triton.jit") + ["", ""]
    lines.append("@triton.jit")
    ptrs = [f"{n}_ptr" for n in ins] + ["consts_ptr"] + [f"{n}_ptr" for n in outs] + ["status_ptr"]
    lines.append(f"def _kernel({', '.join(ptrs)}, nrows, BLOCK: tl.constexpr):")
    lines.append("    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    lines.append("    mask = rows < nrows")
    lines.append("    _one = tl.load(consts_ptr)")
    lines.append("    _zero = _one - _one")
    for i in range(len(numbers)):
        lines.append(f"    _k{i} = tl.load(consts_ptr + {i + 1})")
    for n_, syms in program.inputs:
        for col, s in enumerate(syms):
            lines.append(f"    {s} = tl.load({n_}_ptr + rows * {widths[n_]} + {col}, mask=mask, other=0.0)")
    lines.append("    bad = rows * 0")
    lines += [f"    {ln}" for ln in statement_lines(program, pr, Rules)]
    for n_, exprs in program.outputs:
        for col, e in enumerate(exprs):
            lines.append(f"    tl.store({n_}_ptr + rows * {owidths[n_]} + {col}, "
                         f"{pr(e) if e != 0 else '_zero'} + _zero, mask=mask)")
    lines.append("    tl.store(status_ptr + rows, bad.to(tl.uint8), mask=mask)")
    lines += ["", ""]
    lines.append(constants_line(numbers))
    lines.append(f"WIDTHS = {tuple(widths[n] for n in ins)!r}")
    lines.append(f"OUT_WIDTHS = {tuple(owidths[n] for n in outs)!r}")
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("BLOCK = 256")
    lines.append("")
    lines.append("")
    lines.append(f"def kernel({', '.join(ins)}):")
    lines.append('    """Contiguous tensors (N, k) on one device in, (outputs, status) out."""')
    lines.append(f"    ref = {ins[0]}")
    lines.append("    nrows = ref.shape[0]")
    lines.append("    consts = torch.tensor(CONSTANTS, dtype=ref.dtype, device=ref.device)")
    lines.append("    outs = tuple(torch.empty((nrows, w), dtype=ref.dtype, device=ref.device) for w in OUT_WIDTHS)")
    lines.append("    status = torch.zeros(nrows, dtype=torch.uint8, device=ref.device)")
    lines.append("    grid = (triton.cdiv(max(nrows, 1), BLOCK),)")
    lines.append(f"    _kernel[grid]({', '.join(ins)}, consts, *outs, status, nrows, BLOCK=BLOCK)")
    lines.append("    return outs, status")
    lines.append("")
    return "\n".join(lines)


def require_triton() -> None:
    try:
        import triton  # noqa: F401
    except ImportError:
        raise RuntimeError("the triton target needs triton: pip install 'galinear[triton]'") from None
    import torch

    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("Triton kernels run on a CUDA GPU; without one set TRITON_INTERPRET=1 (before "
                           "importing triton) to run them in Triton's interpreter on the CPU")


class Loaded(_Loaded):
    TARGET = NAME

    def __init__(self, sources, name, guards, widths, out_widths, multiplications=0):
        require_triton()  # before the module, which imports triton
        super().__init__(sources, name, guards, widths, out_widths, multiplications)

    def run(self, values, names, out=None, parallel=False):
        import torch

        self.refuse_out(out)
        tensors, given = as_tensors(values)
        lead = torch.broadcast_shapes(*(t.shape[:-1] for t in tensors))
        flat = [t.expand(*lead, t.shape[-1]).reshape(-1, t.shape[-1]).contiguous() for t in tensors]
        outs, status = self.module.kernel(*flat)
        self.raise_status(status.cpu().numpy())
        outs = tuple(o.reshape(*lead, o.shape[-1]) for o in outs)
        return outs if given else tuple(o.detach().cpu().numpy() for o in outs)
