"""An output folder and a --save folder hold one study: another one is refused before anything
loads unless --overwrite replaces it; the same settings resume as before."""
import dataclasses
import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study
from galinear.compress.study import folders as study_folders
from galinear.lm import models  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS  # noqa: E402

SETTINGS = dict(datasets=("a",), layer_sets=((0,),), methods=("lr1-cf",))


def _run(tmp_path, tiny, **overrides):
    config = tiny_config(tmp_path / "out", save_dir=str(tmp_path / "keep"), **{**SETTINGS, **overrides})
    return Study(config, tiny, texts=TEXTS).run(report=True)["entries"]


def _no_loading(monkeypatch):
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model was loaded before the check"))


def test_a_second_study_in_a_used_folder_is_refused_and_overwrite_replaces_it(tmp_path, tiny, monkeypatch):
    first = _run(tmp_path, tiny)
    record = json.loads((tmp_path / "out" / study_folders.RECORD).read_text())
    assert record["settings"]["train_windows"] == 3 and json.loads((tmp_path / "keep" / study_folders.RECORD)
                                                                     .read_text())["study"] == record["study"]
    _no_loading(monkeypatch)
    for other in (dict(train_windows=2), dict(distill=True, valid_windows=1)):  # refused before any loading
        with pytest.raises(ValueError, match=r"--out .*out holds the results of another study .*(train_windows 3 "
                                             r"there, 2 here|distill false there, true here).*--overwrite"):
            Study(tiny_config(tmp_path / "out", **{**SETTINGS, **other}), None, texts=TEXTS)
    with pytest.raises(ValueError, match=r"--save .*keep holds the compressed models of another study"):
        Study(tiny_config(tmp_path / "elsewhere", save_dir=str(tmp_path / "keep"), train_windows=2, **SETTINGS),
              None, texts=TEXTS)
    monkeypatch.undo()
    second = _run(tmp_path, tiny, train_windows=2, overwrite=True)
    assert set(second) == set(first) and second != first  # the first study's rows are gone, not mixed in
    assert json.loads((tmp_path / "out" / "results.json").read_text())["entries"] == second
    assert json.loads((tmp_path / "out" / study_folders.RECORD).read_text())["settings"]["train_windows"] == 2
    kept = sorted(p.name for p in (tmp_path / "keep").iterdir() if p.is_dir())
    assert kept == ["lr1-cf-s0-L0"]  # one study's models, recorded beside them
    assert json.loads((tmp_path / "keep" / study_folders.RECORD).read_text())["settings"]["train_windows"] == 2


def test_model_folders_under_out_are_the_studys_and_overwrite_replaces_them(tmp_path, tiny, monkeypatch):
    """Without --save a study keeps its models under <out>/models: they count as its results, and
    --overwrite removes them (the index too) before the new study writes its own."""
    config = tiny_config(tmp_path / "out", **SETTINGS)
    Study(config, tiny, texts=TEXTS).run(report=False)
    models_dir = tmp_path / "out" / "models"
    assert sorted(os.listdir(models_dir)) == ["index.json", "lr1-cf-s0-L0"]
    (tmp_path / "out" / "results.json").unlink()  # the kept folder alone still makes the folder this study's
    _no_loading(monkeypatch)
    with pytest.raises(ValueError, match=r"--out .*out holds the results of another study .*train_windows"):
        Study(tiny_config(tmp_path / "out", **{**SETTINGS, "train_windows": 2}), None, texts=TEXTS)
    monkeypatch.undo()
    (models_dir / "lr1-cf-s0-L0" / "marker").write_text("the first study's")
    Study(tiny_config(tmp_path / "out", train_windows=2, overwrite=True, **SETTINGS), tiny, texts=TEXTS).run(
        report=False)
    assert sorted(os.listdir(models_dir)) == ["index.json", "lr1-cf-s0-L0"]
    assert not (models_dir / "lr1-cf-s0-L0" / "marker").exists()  # removed and written again


def test_the_same_study_resumes_and_settings_of_no_result_do_not_count(tmp_path, tiny):
    first = _run(tmp_path, tiny)
    (tmp_path / "out" / "results.json").unlink()  # as if stopped before its rows were written
    again = _run(tmp_path, tiny, threads=1, shard_windows=2, progress=False)
    assert {k: v["log_ppl"] for k, v in again.items()} == {k: v["log_ppl"] for k, v in first.items()}


def test_a_folder_without_results_or_a_record_is_taken(tmp_path, tiny):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    _run(tmp_path, tiny)
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"  # --overwrite or not, only a study's files go
    _run(tmp_path, tiny, train_windows=2, overwrite=True)
    assert (tmp_path / "out" / "notes.txt").exists()


def test_a_damaged_record_is_refused_with_the_fix(tmp_path, tiny, monkeypatch):
    _run(tmp_path, tiny)
    (tmp_path / "out" / study_folders.RECORD).write_text("{not json")
    _no_loading(monkeypatch)
    with pytest.raises(ValueError, match=r"study.json.*--overwrite"):
        Study(tiny_config(tmp_path / "out", **SETTINGS), None, texts=TEXTS)


def test_the_command_refuses_a_second_study_in_one_line(tmp_path, tiny, capsys, monkeypatch):
    from galinear.cli import main

    _run(tmp_path, tiny)
    (tmp_path / "a.txt").write_text(TEXTS["a"])
    _no_loading(monkeypatch)
    code = main(["compress", "--no-progress", "--text", str(tmp_path / "a.txt"), "--layers", "0", "--out",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "holds the results of another study" in err, err


def test_a_save_folder_of_another_model_content_is_refused(tmp_path, tiny):
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import CharTokenizer, tiny_llama

    _run(tmp_path, tiny)
    other = LoadedModel(tiny_llama(seed=1), CharTokenizer(), "tiny-llama")  # the same name, other weights
    config = tiny_config(tmp_path / "out2", save_dir=str(tmp_path / "keep"), **SETTINGS)
    with pytest.raises(ValueError, match=r"--save .*keep holds compressed models of the same settings made from "
                                         r"another model.*--overwrite"):
        Study(config, other, texts=TEXTS)
    Study(dataclasses.replace(config, overwrite=True), other, texts=TEXTS)  # replaces the models
    assert not any(p.is_dir() for p in (tmp_path / "keep").iterdir())
