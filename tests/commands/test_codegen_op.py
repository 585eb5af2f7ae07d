"""`galinear codegen --op` for every target of the registry, and `--help` listing the registry."""
import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from galinear.cli import build_parser, main
from galinear.compiler.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("target", TARGETS)
def test_op_prints_for_every_registered_target(target, capsys):
    assert main(["codegen", "--op", "sandwich", "--n", "2", "--target", target, "--print"]) == 0
    out = capsys.readouterr().out
    assert f"target:     {target}" in out and "KernelSpec(op='sandwich', metric=(1, 1))" in out
    if target == "c":
        assert out.index("#ifndef GALINEAR_SANDWICH_PP_H") < out.index('#include "sandwich_pp.h"')
        assert "int sandwich_pp_f64(" in out
    else:
        ast.parse(out)  # one Python module


def test_op_writes_the_files_of_the_target(tmp_path, capsys):
    assert main(["codegen", "--op", "gp", "--n", "2", "--target", "c", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gp_pp.c", "gp_pp.h"]
    assert main(["codegen", "--op", "gp", "--n", "2", "--target", "numpy", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "gp_pp.py").exists() and "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("op", ["gp", "lc", "sandwich", "sandwich2"])
def test_op_through_the_compiler_printer_computes_what_the_shipped_frame_does(op, rng):
    """The numpy printer's kernel of an operation against the torch kernel of the shipped frames."""
    torch = pytest.importorskip("torch")
    from galinear.compiler.build import op_sources
    from galinear.symbolic.codegen import generate
    from galinear.symbolic.spec import KernelSpec

    spec = KernelSpec(op, (1, 1, -1))
    framed, printed = {}, {}
    exec(compile(generate(spec, "torch"), "framed", "exec"), framed)  # noqa: S102 - generated here
    exec(compile(op_sources(spec, "numpy").text, "printed", "exec"), printed)  # noqa: S102
    widths = [len(syms) for _, syms in spec.program().inputs]
    args = [rng.standard_normal((5, w)) for w in widths]
    expected = framed["kernel"](*[torch.from_numpy(a) for a in args]).numpy()
    (got,), status = printed["kernel"](*args)
    assert status is None and got.shape == (5, 8)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_help_lists_the_registry(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["codegen", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "one of the registered targets: " + ", ".join(TARGETS) in help_text


def test_help_reads_the_registry_without_loading_the_compiler():
    code = ("import sys\nfrom galinear.cli import build_parser\nfrom galinear.commands.codegen import "
            "registered_targets\ntext = build_parser()._subparsers._group_actions[0].choices['codegen'].format_help()\n"
            "print(registered_targets(), 'galinear.compiler' in sys.modules, 'sympy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{TARGETS!r} False False"


def test_no_other_tuple_of_target_names_in_the_commands_and_the_compiler():
    """The registry is the one list: no tuple, list or set of two or more target names elsewhere."""
    registry = ROOT / "galinear" / "compiler" / "targets" / "__init__.py"
    found = []
    for folder in ("commands", "compiler"):
        for path in sorted((ROOT / "galinear" / folder).rglob("*.py")):
            if path == registry:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in TARGETS]
                    if len(names) >= 2:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {names}")
    assert not found, found
