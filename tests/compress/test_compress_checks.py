"""`galinear compress` refuses, in one line and before any model loads, an option that has no effect
in the combination given, a layer range beyond any model and a text it cannot use; a diverging
distillation ends in one line too."""
import argparse
import re

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.cli import main  # noqa: E402
from galinear.commands import compress  # noqa: E402
from galinear.testing.models import random_text  # noqa: E402


def _refused(capsys, *argv):
    """Exit status 2 and the one line on stderr of ``galinear compress ARGV``."""
    code = main(["compress", "--no-progress", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("galinear compress: error: "), err
    return err


@pytest.mark.parametrize("argv, option, other", [
    (["--distill-steps", "5"], "--distill-steps", "--distill"),
    (["--distill-steps", "0"], "--distill-steps", "--distill"),
    (["--distill-lr", "0.1"], "--distill-lr", "--distill"),
    (["--distill-eval-every", "2"], "--distill-eval-every", "--distill"),
    (["--wikitext", "off", "--wikitext-windows", "4"], "--wikitext-windows", "--wikitext"),
    (["--wikitext", "off", "--wikitext-window", "64"], "--wikitext-window", "--wikitext"),
    (["--preset", "paper", "--wikitext-windows", "4"], "--wikitext-windows", "--preset paper"),
    (["--fixed-steps", "--max-steps", "5"], "--max-steps", "--fixed-steps"),
    (["--fixed-steps", "--eval-every", "5"], "--eval-every", "--fixed-steps"),
    (["--fixed-steps", "--patience", "2"], "--patience", "--fixed-steps"),
    (["--fixed-steps", "--valid-windows", "1"], "--valid-windows", "--fixed-steps"),
    (["--epochs", "2"], "--epochs", "--until-converged"),
    (["--o-epochs", "2"], "--o-epochs", "--refit-o-proj"),
    (["--layers", "0;1", "--multi-seeds", "0"], "--multi-seeds", "--seeds"),
    (["--layers", "0,1", "--seeds", "1", "--multi-seeds", "0"], "--seeds", "--multi-seeds"),
    (["--methods", "rotor,lr1", "--rank", "8"], "--rank", "--methods"),
    (["--methods", "lr", "--budget", "0.02", "--rank", "8"], "--rank", "--budget"),
    (["--methods", "rotor", "--terms", "2"], "--terms", "--methods"),
    (["--methods", "lr1", "--chunk", "64"], "--chunk", "--methods"),
    (["--methods", "lr1", "--bh-blocks", "4"], "--bh-blocks", "--methods"),
    (["--methods", "lr1", "--hidden", "64"], "--hidden", "--methods"),
    (["--methods", "lr1,dense", "--budget", "0.1"], "--budget", "--methods"),
    (["--methods", "lr1-cf", "--objective", "attention"], "--objective", "--methods"),
    (["--methods", "rotor", "--baseline-fit", "adam"], "--baseline-fit", "--methods"),
    (["--methods", "lr1-cf", "--until-converged"], "--until-converged", "--methods"),
    (["--text-field", "text"], "--text-field", "--text"),
    (["--gguf-file", "model.gguf"], "--gguf-file", "--model"),
])
def test_an_option_without_effect_is_refused_naming_both(capsys, no_loading, argv, option, other):
    err = _refused(capsys, *argv)
    assert f"{option} has no effect" in err and other in err.split("has no effect", 1)[1], err


@pytest.mark.parametrize("argv", [
    [], ["--preset", "full"], ["--preset", "converged", "--refit-o-proj", "--seeds", "0"],
    ["--distill", "--distill-steps", "3", "--distill-lr", "0.01"], ["--wikitext", "file", "--wikitext-windows", "4"],
    ["--fixed-steps", "--epochs", "2"], ["--max-steps", "5", "--patience", "2"], ["--refit-o-proj", "--o-epochs", "2"],
    ["--layers", "0,1;2", "--multi-seeds", "0", "--seeds", "1,2"], ["--methods", "lr", "--rank", "8"],
    ["--methods", "lr", "--budget", "0.02"], ["--methods", "lr1-cf", "--distill", "--patience", "2"],
    ["--methods", "rotorlin-m", "--max-steps", "5"], ["--methods", "lr1", "--baseline-fit", "adam"],
])
def test_options_with_an_effect_pass(argv):
    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    assert compress.unused_option_problem(parser.parse_args(argv)) is None


def test_until_converged_and_fixed_steps_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as info:
        main(["compress", "--until-converged", "--fixed-steps"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--fixed-steps" in err and "--until-converged" in err and err.count("\n") == 1


@pytest.mark.parametrize("layers", ["0-100000000000000000000", "0-1000000000", "5;0-99999"])
def test_a_layer_range_beyond_any_model_is_refused_before_it_is_built(capsys, no_loading, monkeypatch, layers):
    from galinear.compress.study import sequential

    built = []
    monkeypatch.setattr(sequential, "range", lambda *a: built.append(a) or range(*a), raising=False)
    assert "is beyond any model" in _refused(capsys, "--layers", layers)
    assert all(len(range(*a)) <= sequential.MAX_LAYER_INDEX + 1 for a in built)


def test_a_text_the_study_cannot_use_is_refused_before_the_model_loads(capsys, no_loading, monkeypatch, tmp_path):
    from galinear.data import text

    monkeypatch.setattr(text, "load_text_file", lambda *a: pytest.fail("the text was read whole"))
    plain, empty, rows = tmp_path / "plain.txt", tmp_path / "empty.txt", tmp_path / "rows.jsonl"
    plain.write_text(random_text(400, 1))
    empty.write_text(" \n\n")
    rows.write_text('{"body": "one"}\n{"body": "two"}\n')
    err = _refused(capsys, "--text", str(plain), "--text-field", "text")
    assert "plain.txt, line 1: not valid JSON" in err and "drop --text-field" in err
    assert "empty.txt' holds no text" in _refused(capsys, "--text", str(empty))
    assert "rows.jsonl, line 1: no field 'text'; fields there: ['body']" in _refused(capsys, "--text", str(rows),
                                                                                       "--text-field", "text")


def test_a_text_above_the_size_limit_is_refused_before_it_is_read(capsys, no_loading, tmp_path):
    from galinear.data.text import MAX_TEXT_BYTES

    big = tmp_path / "big.txt"
    with open(big, "wb") as handle:
        handle.write(b"words and more words\n" * 4000)  # the sample read is text
        handle.truncate(3 * MAX_TEXT_BYTES)  # sparse: no disk space taken
    err = _refused(capsys, "--text", str(big))
    assert "big.txt is 3.0 GiB" in err and "more than the 1.0 GiB" in err and "head -c" in err


def test_wikitext_hub_without_datasets_is_refused_before_the_model_loads(capsys, no_loading, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "datasets" else real(name, *a))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert "--wikitext hub needs the `datasets` package" in _refused(capsys, "--wikitext", "hub")
    monkeypatch.setattr(importlib.util, "find_spec", real)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if real("datasets") is not None:
        assert "HF_HUB_OFFLINE=1 forbids" in _refused(capsys, "--wikitext", "hub")


def test_a_diverging_distillation_ends_in_one_line(capsys, tmp_path):
    from galinear.testing.folders import tiny_model_folder

    model = tiny_model_folder(tmp_path / "model")
    text = tmp_path / "a.txt"
    text.write_text(random_text(2400, 1))
    code = main(["compress", "--no-progress", "--model", model, "--text", str(text), "--layers", "0", "--methods", "lr1-cf",
                 "--window", "32", "--stride", "16", "--train-windows", "3", "--eval-windows", "2",
                 "--mse-windows", "1", "--wikitext", "off", "--out", str(tmp_path / "out"), "--distill",
                 "--distill-lr", "1e30", "--distill-steps", "4", "--distill-eval-every", "2", "--valid-windows", "1"])
    err = capsys.readouterr().err  # the study's progress lines, then the error
    last = err.rstrip("\n").split("\n")[-1]
    assert code == 2 and "Traceback" not in err, err
    assert last.startswith("galinear compress: error: ") and re.search(r"non-finite .*--distill-lr", last), last


def test_a_text_too_short_for_a_window_or_the_training_windows_is_refused_before_the_model_loads(
        capsys, no_loading, tmp_path):
    short, some = tmp_path / "short.txt", tmp_path / "some.txt"
    short.write_text("a few words only")
    some.write_text("abcdefghijklmno\n" * 373)  # 5,968 bytes: 372 windows of 32 at stride 16
    err = _refused(capsys, "--text", str(short), "--texts", "", "--window", "32", "--stride", "16")
    assert "the short text has at most 16 tokens (one per UTF-8 byte), fewer than one window of 32" in err
    err = _refused(capsys, "--text", str(some), "--texts", "", "--window", "32", "--stride", "16",
                   "--train-windows", "400")
    assert re.search(r"--train-windows 400: the some text gives at most \d+ training windows beside its held-out "
                     r"ones \(at most 5,968 tokens", err) and "give --train-windows" in err, err
    assert "--until-converged needs for validation" in err


def test_training_windows_beyond_the_tokenised_text_are_refused_naming_the_count(tmp_path):
    """After tokenising (fewer tokens than bytes), the exact count: never a quiet cap, never a failure
    after the fits that names an option nobody gave."""
    import dataclasses

    import numpy as np

    from galinear.compress.orchestrator import split_text
    from galinear.testing.compression import tiny_config

    config = tiny_config(tmp_path, datasets=("a",), train_windows=3)
    tokens = np.arange(16 * 12 + 32) % 50
    assert len(split_text("a", tokens, config).train) == 3
    with pytest.raises(ValueError, match=r"--train-windows 1000: the a text gives \d+ training windows beside its "
                                         r"held-out ones \(224 tokens, --window 32, --stride 16\); give --train-windows"):
        split_text("a", tokens, dataclasses.replace(config, train_windows=1000))
    converged = dataclasses.replace(config, until_converged=True, train_windows=1000)
    with pytest.raises(ValueError, match="one of which the stopping rule of --until-converged needs for validation"):
        split_text("a", tokens, converged)
    from galinear.lm.windows import split_windows

    pool = len(split_windows(tokens, 32, 16, config.heldout_fraction, config.split_seed, config.group,
                             max_heldout=config.eval_windows).train)
    with pytest.raises(ValueError, match=rf"--train-windows {pool} takes every training window of the a text \({pool}\), "
                                         rf"leaving none for the validation windows the stopping rule of --until-converged "
                                         rf"draws; give --train-windows {pool - 1} or fewer"):
        split_text("a", tokens, dataclasses.replace(converged, train_windows=pool))
    with pytest.raises(ValueError, match=r"the a text has 20 tokens, fewer than one window of 32"):
        split_text("a", tokens[:20], config)
