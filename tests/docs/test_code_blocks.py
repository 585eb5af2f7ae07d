"""Every ```python block of README.md and docs/*.md runs, each on its own.

A block is a complete program: it runs in a fresh namespace, in an empty temporary folder, with
nothing from the blocks before it. A block whose line before the fence is ``<!-- slow -->`` runs
only under the ``slow`` marker (``make test-slow``). Output, shell sessions and code that is not
meant to run use another language tag (``text``, ``console``, ``c``).

The gallery (docs/gallery/) runs its own examples when the site is built.
"""
from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
MARK = re.compile(r"^\s*<!--\s*(?P<mark>[\w-]+)\s*(?::[^>]*)?-->\s*$")


@dataclass(frozen=True)
class Block:
    path: str       # relative to the repository root
    line: int       # of the opening fence, 1-based
    language: str
    marks: tuple
    source: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def blocks_of(text: str, path: str = "<text>") -> list[Block]:
    """The fenced blocks of a Markdown text, with the marks of the comment line just above each."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], match["indent"]
        j = i + 1
        while j < len(lines) and not lines[j].lstrip().startswith(fence):
            j += 1
        body = textwrap.dedent("\n".join(line[len(indent):] if line.startswith(indent) else line
                                         for line in lines[i + 1:j]))
        above = MARK.match(lines[i - 1]) if i > 0 else None
        marks = (above["mark"],) if above else ()
        found.append(Block(path, i + 1, match["lang"].lower(), marks, body + "\n"))
        i = j + 1
    return found


def documents() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("*/*.md"))


def python_blocks() -> list[Block]:
    out = []
    for path in documents():
        if "gallery" in path.relative_to(ROOT).parts:
            continue
        text = path.read_text(encoding="utf-8")
        out += [b for b in blocks_of(text, str(path.relative_to(ROOT))) if b.language in ("python", "py")]
    return out


def _params():
    params = []
    for block in python_blocks():
        marks = [pytest.mark.slow] if "slow" in block.marks else []
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


def test_the_parser_reads_fences_marks_and_indented_blocks():
    text = ("intro\n\n```python\nx = 1\n```\n\n<!-- slow -->\n```python\ny = 2\n```\n\n"
            "```text\noutput\n```\n\n- a list item:\n\n    ```python\n    z = 3\n    ```\n")
    blocks = blocks_of(text, "t.md")
    assert [(b.line, b.language, b.marks, b.source) for b in blocks] == [
        (3, "python", (), "x = 1\n"), (8, "python", ("slow",), "y = 2\n"),
        (12, "text", (), "output\n"), (18, "python", (), "z = 3\n")]


def test_the_documents_hold_python_blocks():
    blocks = python_blocks()
    assert len(blocks) >= 25, [b.id for b in blocks]
    assert any(b.path == "README.md" for b in blocks)


@pytest.mark.parametrize("block", _params())
def test_block_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setitem(os.environ, "HF_HUB_OFFLINE", "1")
    code = compile(block.source, f"{ROOT / block.path}:{block.line}", "exec")
    namespace = {"__name__": "__main__"}
    try:
        exec(code, namespace)
    finally:
        if "matplotlib.pyplot" in __import__("sys").modules:
            __import__("matplotlib.pyplot").pyplot.close("all")
