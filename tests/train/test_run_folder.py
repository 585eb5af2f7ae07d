"""One run-folder implementation for train-mlp and train-lm (galinear.train.run_folder)."""
import json

import pytest
import torch

from galinear import _io
from galinear.train.lm_loop import LM_RUNS
from galinear.train.loop import MLP_RUNS
from galinear.train.run_folder import RunFormat, differences


def _check(history, path, fix, run=None):
    if not isinstance(history, dict) or not isinstance(history.get("steps"), list):
        raise _io.CorruptFileError(path, "not a toy history", fix)
    if run is not None and len(history["steps"]) > run["train"]["steps"]:
        raise _io.CorruptFileError(path, "records more steps than the run", fix)
    return history


EXAMPLE = RunFormat(command="toy", config_parts=("model", "train"), checkpoint_keys=("optimizer", "history"),
                    comparable=lambda config: {k: v for k, v in config.items() if k != "data"},
                    check_history=_check, restart="start again")
CONFIG = {"model": {"width": 4}, "train": {"steps": 3}, "data": {"data_sha256": "a" * 64}}


def _checkpoint(run, history, config=CONFIG, optimizer=None):
    run.mkdir(parents=True, exist_ok=True)
    _io.save_state(run / "checkpoint.pt", {"optimizer": {"state": {}} if optimizer is None else optimizer,
                                           "history": history, "config": config, "weights": torch.zeros(2)})


def test_a_new_folder_is_created_and_has_no_state(tmp_path):
    assert EXAMPLE.check_folder(tmp_path / "run", CONFIG) is None
    assert (tmp_path / "run").is_dir() and EXAMPLE.load_history(tmp_path / "run") is None


def test_the_checkpoint_of_the_same_run_is_returned_and_its_history_rewritten(tmp_path):
    run = tmp_path / "run"
    _checkpoint(run, {"steps": [1.0, 2.0], "config": CONFIG})
    state = EXAMPLE.check_folder(run, CONFIG)
    assert state["history"]["steps"] == [1.0, 2.0] and torch.equal(state["weights"], torch.zeros(2))
    told = []
    assert EXAMPLE.load_history(run, told.append)["steps"] == [1.0, 2.0]
    assert json.loads((run / "history.json").read_text())["steps"] == [1.0, 2.0]
    assert told and "rewritten from" in told[0]


@pytest.mark.parametrize("change, message", [
    ({"model": {"width": 8}, "train": {"steps": 3}}, "model.width 4 -> 8"),
    ({**CONFIG, "data": {"data_sha256": "b" * 64}}, "another data"),
])
def test_another_run_or_a_longer_history_is_refused(tmp_path, change, message):
    run = tmp_path / "run"
    _checkpoint(run, {"steps": [1.0, 2.0]})
    with pytest.raises(ValueError, match=message):
        EXAMPLE.check_folder(run, change)


def test_a_history_longer_than_the_run_is_refused(tmp_path):
    short = {**CONFIG, "train": {"steps": 1}}
    _checkpoint(tmp_path / "run", {"steps": [1.0, 2.0]}, config=short)
    with pytest.raises(_io.CorruptFileError, match="records more steps than the run"):
        EXAMPLE.check_folder(tmp_path / "run", short)


def test_damaged_files_name_the_path_and_the_fix(tmp_path):
    run = tmp_path / "run"
    _checkpoint(run, {"steps": [1.0]}, optimizer=[1])
    with pytest.raises(_io.CorruptFileError, match="holds no optimiser state.*delete .*checkpoint.pt to start again"):
        EXAMPLE.check_folder(run, CONFIG)
    run.joinpath("checkpoint.pt").unlink()
    (run / "config.json").write_text(json.dumps({"model": [1]}))
    with pytest.raises(_io.CorruptFileError, match="not a toy configuration \\(model and train settings"):
        EXAMPLE.check_folder(run, CONFIG)
    (run / "history.json").mkdir()
    with pytest.raises(_io.UnreadableFileError, match="not a regular file.*delete the run folder"):
        EXAMPLE.load_history(run)


def test_a_checkpoint_that_is_a_folder_is_named_by_both_commands(tmp_path):
    for runs in (MLP_RUNS, LM_RUNS, EXAMPLE):
        run = tmp_path / runs.command
        (run / "checkpoint.pt").mkdir(parents=True)
        with pytest.raises(_io.UnreadableFileError, match="checkpoint.pt: is a folder"):
            runs.load_history(run)


def test_a_foreign_checkpoint_lists_what_it_lacks(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _io.save_state(run / "checkpoint.pt", {"history": {}})
    with pytest.raises(_io.CorruptFileError, match="not a train-lm checkpoint \\(model, optimizer, scheduler, "
                                                   "torch_rng, history and config expected\\)"):
        LM_RUNS.load_history(run)


def test_differences_name_every_changed_field():
    assert differences({"model": {"a": 1}, "x": 1}, {"model": {"a": 2}, "x": 2}) == "model.a 1 -> 2, x 1 -> 2"
    assert differences({"model": {}}, {"model": {}}) == "other fields"


def test_runs_are_collected_by_group_and_seed(tmp_path):
    from galinear.train.run_folder import run_folder_name

    for name, steps in ((run_folder_name("rotor", 0), [1.0]), (run_folder_name("rotor", 1), [2.0]),
                        (run_folder_name("dense", 0, "wide"), []), ("notes", [3.0])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "history.json").write_text(json.dumps({"steps": steps}))
    groups = EXAMPLE.collect(tmp_path, lambda history: bool(history["steps"]))
    assert groups == {"rotor": {0: {"steps": [1.0]}, 1: {"steps": [2.0]}}}
    assert set(EXAMPLE.collect(tmp_path, lambda history: True)) == {"rotor", "dense-wide"}


def test_mean_std_and_the_results_folder(tmp_path):
    import statistics

    from galinear.train.run_folder import make_results_folder, mean_std

    assert mean_std([1.0, 2.0, 4.0]) == pytest.approx((7 / 3, statistics.stdev([1.0, 2.0, 4.0])))
    assert mean_std(iter([3.0])) == (3.0, 0.0)
    assert make_results_folder(tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="cannot create the results folder .*choose another --out"):
        make_results_folder(tmp_path / "file" / "x")
