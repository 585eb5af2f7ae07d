"""`galinear tour` runs its checks and reports success; bad arguments are one error line."""
import pytest

from galinear.cli import main

pytest.importorskip("clifford", reason="the tour compares against clifford (test extra)")


def test_tour_passes(capsys):
    assert main(["tour", "--n", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and "FAIL" not in out
    assert "clifford" in out and "expm" in out
    assert "MultiVector" in out and "Cl(3,1)" in out and "PGA" in out
    pytest.importorskip("torch", reason="the torch steps need torch")
    assert "motor_exp vs expm" in out and "galinear.nn.inspect.planes" in out
    assert "listed angles - the angles set" in out


# n >= 5 compiles the dense products of Cl(5..8) (9 s to a minute each with a cold numba cache): make test-slow
@pytest.mark.parametrize("n", [pytest.param(n, marks=pytest.mark.slow if n >= 5 else ()) for n in range(2, 9)])
def test_tour_passes_in_every_dimension_with_tolerances_in_ulps(capsys, n):
    """Every n the tour offers, with seed 17 (whose random Cl(8) multivector is singular to working
    precision: the tour inverts 1 + X / 2^(n/2) instead); each tolerance is a stated ULP budget."""
    assert main(["tour", "--n", str(n), "--seed", "17"]) == 0
    out = capsys.readouterr().out
    checks = [line for line in out.splitlines() if "max error" in line]
    assert checks and all(" ulp = " in line and line.endswith(" ok") for line in checks), out
    assert "(tol 0 ulp" not in out  # no comparison of two rounding paths at zero tolerance


@pytest.mark.parametrize("args,message", [(["--n", "12"], "--n must be between 2 and 8, got 12"),
                                          (["--seed", "-3"], "--seed must be a non-negative integer, got -3")])
def test_tour_rejects_bad_arguments(capsys, args, message):
    assert main(["tour", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"galinear tour: error: {message}\n" and captured.out == ""
