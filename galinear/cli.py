"""The ``galinear`` command line (also ``python -m galinear``).

Each subcommand lives in ``galinear/commands/<name>.py`` and defines ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``. Those modules import only the standard
library at top level, so ``galinear --help`` stays fast; heavy imports happen inside ``run``.
"""
import argparse
import importlib
import sys

from galinear._version import __version__

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
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="galinear",
        description="Exact geometric algebra, fast rotor layers, rotor compression of linear layers.",
    )
    parser.add_argument("--version", action="version", version=f"galinear {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"galinear.commands.{module_name}")
        sub_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 0
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
