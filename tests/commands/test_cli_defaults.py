"""Command-line defaults are the fields of the configuration dataclasses, and those fields are the
measured configurations of docs/results.md."""
import argparse
import subprocess
import sys

import pytest

from galinear.cli import build_parser
from galinear.train.config import MLPConfig, TrainConfig


def test_train_mlp_defaults_are_the_measured_configuration():
    # docs/results.md, "The default configuration": 1024 x 2, GELU, chunk 128 on the dense backend,
    # N(0, 1) bivectors; AdamW without weight decay, 10 epochs of batch 256, lr 7e-3, 50 warm-up steps
    model, train = MLPConfig(), TrainConfig()
    assert (model.hidden, model.depth, model.activation, model.chunk_size, model.backend, model.rotor_init_std) \
        == (1024, 2, "gelu", 128, "dense", 1.0)
    assert (train.epochs, train.batch_size, train.lr, train.weight_decay, train.warmup_steps) == (10, 256, 7e-3, 0.0, 50)
    args = build_parser().parse_args(["train-mlp"])
    for name in ("hidden", "depth", "activation", "chunk_size", "backend", "rotor_init_std", "layer_norm", "bias",
                 "head", "rank", "dropout", "rotor_gradient"):
        assert getattr(args, name) == getattr(model, name), name
    for name in ("epochs", "batch_size", "lr", "weight_decay", "warmup_steps"):
        assert getattr(args, name) == getattr(train, name), name


def test_train_mlp_options_still_override_the_defaults():
    args = build_parser().parse_args(["train-mlp", "--activation", "relu", "--chunk-size", "64", "--backend", "auto",
                                      "--rotor-init-std", "0.5", "--epochs", "3", "--batch-size", "64", "--lr", "1e-3",
                                      "--warmup-steps", "0", "--no-layer-norm", "--no-bias"])
    assert (args.activation, args.chunk_size, args.backend, args.rotor_init_std) == ("relu", 64, "auto", 0.5)
    assert (args.epochs, args.batch_size, args.lr, args.warmup_steps) == (3, 64, 1e-3, 0)
    assert args.layer_norm is False and args.bias is False


def _compress_args(*argv):
    from galinear.commands import compress

    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    return compress, parser.parse_args(list(argv))


def test_compress_defaults_come_from_the_default_preset():
    from galinear.compress.study.config import DEFAULT_PRESET, preset

    compress, args = _compress_args()
    config = compress.config_from_args(args)
    assert config == preset(DEFAULT_PRESET)  # every field, not only those with an option
    for name in compress.STUDY_FIELDS:
        assert str(getattr(args, name)) == str(getattr(config, name)), name  # what --help shows
    # the values docs/results.md measured with
    assert (config.hidden, config.window, config.stride, config.o_epochs, config.valid_windows) == (512, 512, 256, 15.0, 2)


def test_compress_options_override_study_config():
    compress, args = _compress_args("--hidden", "64", "--window", "32", "--stride", "16", "--o-epochs", "2",
                                    "--valid-windows", "1", "--split-seed", "3", "--objective", "attention",
                                    "--model", "some/folder")
    config = compress.config_from_args(args)
    assert (config.hidden, config.window, config.stride, config.o_epochs) == (64, 32, 16, 2.0)
    assert (config.valid_windows, config.split_seed, config.objective, config.model) == (1, 3, "attention", "some/folder")


@pytest.mark.parametrize("command", ["train-mlp", "compress"])
def test_help_shows_the_dataclass_defaults(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    if command == "train-mlp":
        assert "(default gelu)" in text and "(default 0.007)" in text and "default 128: Cl(7), 21 bivector" in text
    else:
        assert "hidden width (default 512)" in text and "(default 256)" in text and "'smollm2-135m'" in text


def test_building_the_parser_imports_no_torch():
    code = "import sys; from galinear.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
