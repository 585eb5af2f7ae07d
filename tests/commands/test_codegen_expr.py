"""`galinear codegen --expr` and `galinear verify --identity`, end to end through galinear.cli.main."""
import sys
import time

import pytest

from galinear.cli import main

SANDWICH = ["codegen", "--expr", "M * x * ~M", "--input", "M=even", "--input", "x=3", "--signature", "3,0,1"]
IDENTITY = ["verify", "--identity", "a << (b ^ c) == (a << b) * c - (a << c) * b",
            "--input", "a=1", "--input", "b=1", "--input", "c=1"]


def test_codegen_prints_the_source(capsys):
    assert main(SANDWICH + ["--target", "numpy", "--print"]) == 0
    out = capsys.readouterr().out
    assert "Generated kernel expression (numpy)" in out and "input x: e123, e124, e134, e234" in out
    assert "def kernel(" in out


def test_codegen_prints_header_and_source_for_c(capsys):
    assert main(SANDWICH + ["--target", "c", "--print", "--name", "motor"]) == 0
    out = capsys.readouterr().out
    assert out.index("#ifndef") < out.index('#include "motor.h"')
    assert "int motor_f64(" in out


def test_codegen_writes_files_with_the_backward(tmp_path, capsys):
    folder = tmp_path / "kernels"
    assert main(SANDWICH + ["--target", "c", "--grad", "--out", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["expression.c", "expression.h", "expression_backward.c",
                                                         "expression_backward.h"]
    assert "wrote" in capsys.readouterr().out
    assert main(SANDWICH + ["--target", "torch", "--grad", "--out", str(folder)]) == 0
    assert (folder / "expression.py").exists() and (folder / "expression_backward.py").exists()


def test_codegen_verify_prints_the_table(capsys):
    assert main(SANDWICH + ["--target", "numpy", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "verify expression" in out and "galinear" in out and "ok" in out


def test_codegen_verify_failure_is_exit_1(monkeypatch, capsys):
    from galinear.compiler import verify

    monkeypatch.setitem(verify.TOLERANCE, "float64", -1.0)  # nothing can pass
    assert main(SANDWICH + ["--target", "numpy", "--verify"]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "exit status 1" in captured.err


@pytest.mark.parametrize("argv,message", [
    (["--expr", "__import__('os')", "--input", "x=1", "--n", "3", "--print"], "calling '__import__' is not allowed"),
    (["--expr", "x.__class__", "--input", "x=1", "--n", "3", "--print"], "Attribute is not allowed"),
    (["--expr", "lambda: x", "--input", "x=1", "--n", "3", "--print"], "Lambda is not allowed"),
    (["--expr", "x * y", "--input", "x=1", "--n", "3", "--print"], "unknown name 'y'"),
    (["--expr", "x", "--input", "x=1", "--n", "9", "--print"], "n <= 8"),
    (["--expr", "x", "--input", "x=1", "--signature", "5,4,0", "--print"], "n = p+q+r = 9"),
    (["--expr", "x", "--input", "x=1", "--signature", "1" + "0" * 40 + ",0,0", "--print"], "too large"),
    (["--expr", "x", "--input", "x", "--n", "3", "--print"], "name=pattern"),
    (["--expr", "x", "--input", "x=banana", "--n", "3", "--print"], "not a grade"),
    (["--expr", "x", "--input", "x=7", "--n", "3", "--print"], "outside 0..3"),
    (["--expr", "x", "--n", "3", "--print"], "at least one --input"),
    (["--expr", "x", "--input", "x=1", "--n", "3"], "give --print, --out DIR or --verify"),
    (["--expr", "x", "--input", "x=1", "--n", "3", "--print", "--out", "d"], "not both"),
    (["--expr", "x", "--input", "x=1", "--n", "3", "--print", "--name", "9x"], "--name"),
    (["--expr", "x", "--op", "gp", "--input", "x=1", "--n", "3", "--print"], "not both"),
    (["--expr", "x", "--input", "x=1", "--print"], "exactly one of --n N or --signature"),
    (["--op", "gp", "--n", "1" + "0" * 30, "--print"], "n <= 8"),
    (["--op", "gp", "--n", "1000000000", "--print"], "n <= 8"),
    (["--op", "gp", "--signature", "1000000000,0,0", "--print"], "too large"),
    (["--op", "gp", "--n", "2", "--target", "fortran", "--print"], "the registered targets are numba, numpy"),
    (["--op", "gp", "--n", "2", "--grad", "--print"], "--grad go with --expr"),
])
def test_codegen_errors_are_one_line_with_exit_2(argv, message, capsys):
    start = time.perf_counter()
    assert main(["codegen"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("galinear codegen: error:") and message in err and err.count("\n") == 1
    assert time.perf_counter() - start < 5  # refused before anything is built


def test_codegen_op_keeps_working(capsys):
    assert main(["codegen", "--op", "gp", "--n", "2", "--print"]) == 0
    assert "def kernel(a, b, out):" in capsys.readouterr().out


def test_help_states_the_exit_statuses(capsys):
    for command in ("codegen", "verify"):
        with pytest.raises(SystemExit) as stop:
            main([command, "--help"])
        assert stop.value.code == 0
        out = capsys.readouterr().out
        assert "exit status" in out and "2 bad input" in out


def test_verify_identity_proved_is_exit_0(capsys):
    assert main(IDENTITY + ["--signatures", "3,0,0", "3,0,1", "2,2,0"]) == 0
    out = capsys.readouterr().out
    assert out.count("proved") >= 3 and "3 proved, 0 refuted, 0 undecided" in out


def test_verify_identity_refuted_is_exit_1(capsys):
    argv = ["verify", "--identity", "a ^ b == b ^ a", "--input", "a=1", "--input", "b=1", "--signatures", "1,0,0",
            "2,0,1"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "refuted" in out and "counterexample" in out and "lhs - rhs" in out


def test_verify_identity_undecided_is_exit_1(monkeypatch, capsys):
    def hang(*args, **kwargs):
        time.sleep(600)

    monkeypatch.setattr(sys.modules["galinear.compiler.prove"], "_exact", hang)
    assert main(IDENTITY + ["--signatures", "3,0,0", "--timeout", "0.3"]) == 1
    assert "undecided" in capsys.readouterr().out


def test_verify_identity_all_signatures(capsys):
    argv = ["verify", "--identity", "a * a == a | a", "--input", "a=1", "--signatures", "all", "--max-n", "2"]
    assert main(argv) == 0
    assert "9 proved" in capsys.readouterr().out


@pytest.mark.parametrize("extra,message", [
    (["--signatures", "3,0,0", "--timeout", "nan"], "--timeout must be"),
    (["--signatures", "3,0,0", "--timeout", "inf"], "--timeout must be"),
    (["--signatures", "3,0,0", "--timeout", "-5"], "--timeout must be"),
    (["--signatures", "3,0,0", "--timeout", "1e300"], "--timeout must be"),
    ([], "give --signatures"),
    (["--signatures", "3,0"], "three integers p,q,r"),
    (["--signatures", "9,0,0"], "n = p+q+r = 9"),
    (["--signatures", "all", "--max-n", "12"], "--max-n"),
    (["--signatures", "3,0,0", "--n", "3"], "do not combine"),
])
def test_verify_identity_errors_are_one_line_with_exit_2(extra, message, capsys):
    assert main(IDENTITY + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("galinear verify: error:") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("identity,message", [
    ("a ^ b", "lhs == rhs"), ("a == b == c", "exactly one top-level =="),
    ("a == __import__('os')", "calling '__import__' is not allowed"), ("a == d", "unknown name 'd'"),
])
def test_verify_identity_text_errors(identity, message, capsys):
    argv = ["verify", "--identity", identity, "--input", "a=1", "--input", "b=1", "--input", "c=1",
            "--signatures", "3,0,0"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_verify_timeout_is_checked_for_the_shipped_proofs_too(capsys):
    assert main(["verify", "--timeout", "nan"]) == 2
    assert main(["verify", "--signatures", "3,0,0"]) == 2
    assert "go with --identity" in capsys.readouterr().err
