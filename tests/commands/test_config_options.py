"""Options generated from configuration dataclasses (galinear.commands._config_options)."""
import argparse
from dataclasses import dataclass

import pytest

from galinear.commands._config_options import Option, add_config_options, config_from_args


@dataclass
class _Example:
    width: int = 8
    scale: float | None = None
    name: str = "a"
    bias: bool = True
    fast: bool = False
    seed: int = 0


def _parser():
    parser = argparse.ArgumentParser()
    add_config_options(parser, _Example, [Option("width", "width (default %(default)s)"), Option("scale"),
                                          Option("name", choices=("a", "b")), Option("bias", flag="--no-bias"),
                                          Option("fast")])
    return parser


def test_defaults_are_the_fields_and_build_the_same_config():
    args = _parser().parse_args([])
    assert (args.width, args.scale, args.name, args.bias, args.fast) == (8, None, "a", True, False)
    assert config_from_args(_Example, args) == _Example()


def test_options_and_overrides_set_the_fields():
    args = _parser().parse_args(["--width", "3", "--scale", "0.5", "--name", "b", "--no-bias", "--fast"])
    assert config_from_args(_Example, args, seed=4) == _Example(width=3, scale=0.5, name="b", bias=False, fast=True,
                                                                seed=4)


@pytest.mark.parametrize("argv", [["--width", "0"], ["--scale", "-1"], ["--scale", "nan"], ["--name", "c"]])
def test_the_annotation_chooses_the_parser(argv):
    with pytest.raises(SystemExit):
        _parser().parse_args(argv)


def test_unknown_fields_are_refused():
    with pytest.raises(ValueError, match="no field 'depth'"):
        add_config_options(argparse.ArgumentParser(), _Example, [Option("depth")])
    with pytest.raises(ValueError, match="no field 'depth'"):
        config_from_args(_Example, argparse.Namespace(), depth=2)


def test_help_is_the_options_text():
    text = _parser().format_help()
    assert "width (default 8)" in text and "--no-bias" in text
