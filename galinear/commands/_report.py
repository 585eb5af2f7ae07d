"""How a ``galinear`` command reports an error: one line on stderr, exit status 2.

Every command reports bad input and failures it can name (a missing file, a damaged checkpoint, a
folder of another configuration) with :func:`fail`, so that scripts read errors from one place
and ``galinear X: error:`` always names the command that refused. Standard library only, like
every module the parser imports.
"""
import sys

__all__ = ["fail"]


def fail(command: str, message: str) -> int:
    """Print ``galinear {command}: error: {message}`` to stderr and return the exit status 2."""
    print(f"galinear {command}: error: {message}", file=sys.stderr, flush=True)
    return 2
