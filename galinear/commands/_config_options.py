"""Command-line options generated from configuration dataclasses, and the configs built back from them.

``galinear train-mlp`` and ``galinear train-lm`` describe each option that sets a dataclass field
with an :class:`Option` (the field's name, its help text, and where the field's annotation does
not say it, the parser or the flag). :func:`add_config_options` adds those options with the
field's default; :func:`config_from_args` builds the dataclass from the parsed arguments, with
overrides for the fields the command sets itself. The argument parsers of the train commands live
here too. Standard library only: the command line imports this module to build its parser.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass

__all__ = ["Option", "add_config_options", "config_from_args", "positive_int", "nonnegative_int", "int_in",
           "positive_float", "nonnegative_float", "probability", "optional_positive_int", "run_tag", "thread_count",
           "seed"]


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def thread_count(text):
    """``--threads``: a positive integer, or ``auto`` (the count chosen from the step times,
    :class:`galinear.optim.threads.ThreadGovernor`)."""
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {text!r}") from None


def _number(text, low=None, low_open=False, high=None, what="a number"):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value) or (low is not None and (value <= low if low_open else value < low)) \
            or (high is not None and value >= high):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
    return value


def positive_float(text):
    return _number(text, 0.0, low_open=True, what="a finite number > 0")


def nonnegative_float(text):
    return _number(text, 0.0, what="a finite number >= 0")


def probability(text):
    return _number(text, 0.0, high=1.0, what="a probability in [0, 1)")


def nonnegative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def int_in(low: int, high: int, what: str = "an integer"):
    """The parser of an integer in ``low..high`` (both included): a request whose size a user types
    is bounded before any work starts."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} in {low:,}..{high:,}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} in {low:,}..{high:,}, got {text}")
        return value

    return parse


def seed(text):
    """A seed: an integer in 0..2**64 - 1 (every seed torch.manual_seed takes)."""
    from galinear.train.config import SEED_LIMIT

    try:
        return int_in(0, SEED_LIMIT)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a seed, an integer in 0..2**64 - 1, got {text}") from None


def optional_positive_int(text):
    return None if text.lower() in ("none", "all") else positive_int(text)


def run_tag(text):
    bad = sorted({c for c in text if not (c.isalnum() or c in "._-")})
    if bad or text in (".", ".."):
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be a tag: it becomes part of a run folder's name, so use only letters, digits, "
            f"'.', '_' and '-'" + (f" (not {' '.join(repr(c) for c in bad)})" if bad else ""))
    return text


#: The parser of a field whose Option names none, by the field's annotation.
_PARSERS = {"int": positive_int, "int | None": positive_int, "float": positive_float,
            "float | None": positive_float, "str": None, "str | None": None}


@dataclass(frozen=True)
class Option:
    """One command-line option that sets the dataclass field ``field``.

    ``flag``: the option string (default ``--field-with-dashes``); for a bool field the option
    stores the opposite of the field's default (``--no-bias`` for a field that defaults to True).
    ``type``: the argument parser (default: by the field's annotation, positive numbers for int
    and float). ``choices`` and ``metavar`` pass through to argparse.
    """

    field: str
    help: str | None = None
    flag: str | None = None
    type: object = None
    choices: tuple | None = None
    metavar: str | None = None


def _annotation(field) -> str:
    """The field's annotation as written (``"int | None"``), whether or not annotations are postponed."""
    kind = field.type
    if isinstance(kind, str):
        return kind
    return kind.__name__ if isinstance(kind, type) else str(kind)


def _fields(config_class) -> dict:
    return {field.name: field for field in dataclasses.fields(config_class)}


def add_config_options(parser, config_class, options) -> None:
    """Add one argparse option per :class:`Option` of ``options``, each defaulting to the value of
    its field in ``config_class()``. Raises ValueError for an Option that names no field."""
    fields, defaults = _fields(config_class), config_class()
    for option in options:
        if option.field not in fields:
            raise ValueError(f"{config_class.__name__} has no field {option.field!r}; name one of "
                             f"{', '.join(fields)}")
        default = getattr(defaults, option.field)
        flag = option.flag or "--" + option.field.replace("_", "-")
        kwargs = {"dest": option.field, "default": default}
        if option.help is not None:
            kwargs["help"] = option.help
        if _annotation(fields[option.field]) == "bool":
            kwargs["action"] = "store_false" if default else "store_true"
        else:
            parse = option.type or _PARSERS.get(_annotation(fields[option.field]))
            if parse is not None:
                kwargs["type"] = parse
            if option.choices is not None:
                kwargs["choices"] = option.choices
            if option.metavar is not None:
                kwargs["metavar"] = option.metavar
        parser.add_argument(flag, **kwargs)


def config_from_args(config_class, args, **overrides):
    """``config_class`` whose fields are the parsed ``args`` of the same name (a field with no
    option keeps its default), then ``overrides``."""
    fields = _fields(config_class)
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ValueError(f"{config_class.__name__} has no field {', '.join(map(repr, unknown))}; name one of "
                         f"{', '.join(fields)}")
    values = {name: getattr(args, name) for name in fields if hasattr(args, name)}
    values.update(overrides)
    return config_class(**values)
