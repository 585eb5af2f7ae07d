"""No test file imports another test file or a conftest: shared helpers live in galinear.testing.
Tests of the command line live in tests/commands/, beside the other subjects' folders.

pytest gives fixtures to every test below a conftest.py without an import; anything else a test
needs from elsewhere belongs to the package (galinear.testing, galinear.testing.models). The test
files are parsed with :mod:`ast`, not imported, so every import is seen, lazy ones included.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def forbidden_imports(source: str, filename: str = "<source>") -> list[str]:
    """``filename:line: statement`` for each import of ``tests`` or ``tests.*``, of a ``conftest``
    module (at any depth), and each relative import (``from . import x``, ``from .x import y``)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"{filename}:{node.lineno}: relative import "
                             f"'from {'.' * node.level}{node.module or ''} import ...'")
                continue
            names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "tests" or "conftest" in parts:
                found.append(f"{filename}:{node.lineno}: import of {name!r}")
                break
    return found


@pytest.mark.parametrize("source,expected", [
    ("from tests.compress.conftest import tiny_llama\n", ["f.py:1: import of 'tests.compress.conftest'"]),
    ("import tests.kernels.oracle\n", ["f.py:1: import of 'tests.kernels.oracle'"]),
    ("from tests import helpers\n", ["f.py:1: import of 'tests'"]),
    ("def f():\n    from .conftest import numpy_gp\n", ["f.py:2: relative import 'from .conftest import ...'"]),
    ("from . import test_rotor_chain\n", ["f.py:1: relative import 'from . import ...'"]),
    ("import conftest\n", ["f.py:1: import of 'conftest'"]),
    ("from galinear import conftest\n", ["f.py:1: import of 'galinear.conftest'"]),
    ("import numpy as np\nfrom galinear.testing import assert_close\nimport testsuite\n", []),
])
def test_the_checker_finds_planted_imports(source, expected):
    assert forbidden_imports(source, "f.py") == expected


def test_no_test_imports_a_test_module_or_a_conftest():
    files = sorted(TESTS.rglob("*.py"))
    assert len(files) > 50, f"expected the test suite under {TESTS}, found {len(files)} files"
    found = [line for path in files
             for line in forbidden_imports(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))]
    assert not found, ("tests import other test modules or a conftest; move what they share to "
                       "galinear.testing (fixtures may stay in conftest.py):\n" + "\n".join(found))


#: Name patterns of test modules about the command line (``galinear COMMAND``).
COMMAND_LINE_NAMES = re.compile(r"test_(cli|commands?)(_.*)?\.py")


def misplaced_command_line_tests(paths) -> list[str]:
    """The paths (relative to the tests folder, ``/``-separated) of modules named like tests of
    the command line (test_cli.py, test_cli_*.py, test_command*.py) not under ``commands/``."""
    return [path for path in paths
            if COMMAND_LINE_NAMES.fullmatch(Path(path).name) and Path(path).parts[0] != "commands"]


@pytest.mark.parametrize("paths,expected", [
    (["test_cli_tour.py", "commands/test_cli_tour.py"], ["test_cli_tour.py"]),
    (["test_command_checks.py", "train/test_commands.py", "test_cli.py"],
     ["test_command_checks.py", "train/test_commands.py", "test_cli.py"]),
    (["commands/test_every_command.py", "test_reliability.py", "nn/test_client.py", "test_clifford.py"], []),
])
def test_the_layout_checker_finds_planted_command_line_tests(paths, expected):
    assert misplaced_command_line_tests(paths) == expected


def test_command_line_tests_live_in_tests_commands():
    paths = [path.relative_to(TESTS).as_posix() for path in sorted(TESTS.rglob("test_*.py"))]
    assert any(path.startswith("commands/") for path in paths), f"no tests/commands/ under {TESTS}"
    found = misplaced_command_line_tests(paths)
    assert not found, "tests of the command line belong in tests/commands/; move them there:\n" + "\n".join(found)
