"""Every command reports an error the same way: ``galinear X: error: ...`` on stderr, exit status 2."""
import pytest

from galinear.cli import main
from galinear.commands._report import fail


def test_fail_writes_one_line_to_stderr(capsys):
    assert fail("demo", "something is wrong; do this instead") == 2
    captured = capsys.readouterr()
    assert captured.err == "galinear demo: error: something is wrong; do this instead\n"
    assert captured.out == ""


@pytest.mark.parametrize("argv, message", [
    (["verify", "--n", "0"], "--n must be a positive integer"),
    (["verify", "--only", "no_such_proof"], "unknown proof(s) no_such_proof"),
    (["codegen", "--n", "2", "--print"], "give --op"),
    (["codegen", "--op", "gp", "--print"], "give exactly one of --n N or --signature"),
    (["codegen", "--op", "gp", "--signature", "x", "--print"], "--signature must be three integers p,q,r"),
    (["compress", "--no-progress", "--methods", ","], "no method given"),
    (["train-mlp", "--no-progress", "--hidden", "1000000000"], "smaller --hidden"),
])
def test_every_command_reports_on_stderr(argv, message, capsys, no_loading, tmp_path):
    if argv[0] == "train-mlp":
        argv = [*argv, "--out", str(tmp_path)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith(f"galinear {argv[0]}: error: ") and message in lines[-1], captured.err
    assert "error" not in captured.out


def test_generate_reports_on_stderr(tmp_path, capsys):
    assert main(["generate", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("galinear generate: error: ") and str(tmp_path) in captured.err
    assert captured.out == ""
