"""`galinear tour` runs its checks and reports success."""
import pytest

from galinear.cli import main

pytest.importorskip("clifford", reason="the tour compares against clifford (test extra)")


def test_tour_passes(capsys):
    assert main(["tour", "--n", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and "FAIL" not in out
    assert "clifford" in out and "expm" in out
    assert "MultiVector" in out and "Cl(3,1)" in out and "PGA" in out


def test_tour_rejects_bad_dimension():
    with pytest.raises(SystemExit, match="between 2 and 8"):
        main(["tour", "--n", "12"])
