"""The ``galinear`` command line (also ``python -m galinear``).

Each subcommand lives in ``galinear/commands/<name>.py`` and defines ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``, and may set ``ON_INTERRUPT`` (what Ctrl-C
leaves behind). Those modules import only the standard library at top level, so ``galinear
--help`` stays fast; heavy imports happen inside ``run``.

Every error reaches the user the same way, whatever the command: a bad argument, galinear's own
errors and Ctrl-C are one line on stderr (``galinear X: error: ...``, exit status 2; ``galinear
X: interrupted; ...``, exit status 130), written by :func:`galinear.commands._report.run_command`
and :class:`OneLineParser`; only a bug shows a traceback.
"""
import argparse
import importlib
import sys

from galinear._version import __version__
from galinear.commands._options import record_given
from galinear.commands._report import DEFAULT_ON_INTERRUPT, run_command

# subcommand name -> module under galinear.commands
COMMANDS = {
    "verify": "verify",
    "codegen": "codegen",
    "train-mlp": "train_mlp",
    "train-lm": "train_lm",
    "compress": "compress",
    "demo": "demo",
    "tour": "tour",
    "generate": "generate",
    "quantize": "quantize",
}


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``galinear X: error: ... (see galinear X --help)``,
    with exit status 2, like every other error of a command (argparse's default prints the whole
    usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="galinear",
        description="Exact geometric algebra, fast rotor layers, rotor compression of linear layers.",
    )
    parser.add_argument("--version", action="version", version=f"galinear {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"galinear.commands.{module_name}")
        sub_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub_parser)
        record_given(sub_parser)  # commands can tell an option given from its default (commands/_options.py)
        sub_parser.set_defaults(_run=module.run, _name=name,
                                _on_interrupt=getattr(module, "ON_INTERRUPT", DEFAULT_ON_INTERRUPT))
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command's own parser, so that the line says which command refused
        command = sub_parser_of(parser, getattr(args, "_name", None)) or parser
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 0
    return run_command(args._name, args._run, args, args._on_interrupt)


def sub_parser_of(parser: argparse.ArgumentParser, name):
    """The parser of subcommand ``name`` (None when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


if __name__ == "__main__":
    sys.exit(main())
