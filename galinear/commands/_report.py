"""How a ``galinear`` command reports an error: one line on stderr, exit status 2.

Every command reports bad input and failures it can name (a missing file, a damaged checkpoint, a
folder of another configuration) with :func:`fail`, so that scripts read errors from one place
and ``galinear X: error:`` always names the command that refused.

:func:`run_command` is the one error boundary of every command (``galinear.cli.main`` calls it):

- galinear's own errors, which name the problem and the fix, become ``galinear X: error: ...`` on
  one line with exit status 2: ValueError and its subclasses (bad arguments, damaged or foreign
  files, ``TooLargeError``, ``IdxFormatError``), a diverging run's ``FloatingPointError`` and a
  missing data set's ``DatasetNotFoundError``;
- a package of an extra that is not installed (torch for ``compress``, matplotlib for a figure)
  becomes ``galinear X: error: ... needs torch: pip install 'galinear[torch]'`` (galinear._extras);
- Ctrl-C (KeyboardInterrupt) becomes one line, ``galinear X: interrupted; ... run the same
  command again to resume``, with exit status 130 (128 + SIGINT, what a shell reports);
- anything else is a bug in galinear and keeps its traceback.

Standard library only, like every module the parser imports.
"""
import sys

__all__ = ["fail", "one_line", "run_command", "INTERRUPTED_STATUS"]

#: Exit status of an interrupted command: 128 + SIGINT, as a shell reports a process stopped by Ctrl-C.
INTERRUPTED_STATUS = 130
#: What a command module says about its saved work when interrupted (a module may set ``ON_INTERRUPT``).
DEFAULT_ON_INTERRUPT = "every file written so far is whole (no file is left half written)"


def _own_errors() -> tuple:
    """The exception types whose messages are written for the user (no traceback)."""
    own = [ValueError, FloatingPointError]
    try:  # galinear.data.idx imports numpy; only reached after a command raised
        from galinear.data.idx import DatasetNotFoundError

        own.append(DatasetNotFoundError)
    except ImportError:
        pass
    return tuple(own)


def one_line(message) -> str:
    """``message`` with every run of whitespace (newlines included) folded into one space."""
    return " ".join(str(message).split())


def fail(command: str, message: str) -> int:
    """Print ``galinear {command}: error: {message}`` to stderr on one line and return the exit status 2."""
    print(f"galinear {command}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return 2


def run_command(command: str, run, args, on_interrupt: str = DEFAULT_ON_INTERRUPT) -> int:
    """``run(args)`` inside the error boundary described in the module docstring; its exit status."""
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(f"\ngalinear {command}: interrupted; {on_interrupt}; run the same command again to resume",
              file=sys.stderr, flush=True)
        return INTERRUPTED_STATUS
    except Exception as error:  # noqa: BLE001  (sorted below: galinear's own errors, or a bug)
        if isinstance(error, _own_errors()):
            return fail(command, str(error) or type(error).__name__)
        if isinstance(error, ModuleNotFoundError):
            from galinear._extras import MissingExtraError, missing_extra

            error = missing_extra(error, "this command")
            if isinstance(error, MissingExtraError):
                return fail(command, str(error))
        raise
