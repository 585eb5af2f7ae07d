"""Reading committed results for pictures: Markdown tables in the docs and benchmark JSON files.

:func:`find_table` finds a table by the first cells of its header row in any Markdown file under
the given folders (so a table keeps being found when a page is split or moved), and
:func:`number` / :func:`mean_std` read its cells (``"1,863,690"``, ``"**3.4141 ± 0.0058**"``).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["markdown_tables", "find_table", "find_tables", "number", "mean_std", "read_json"]

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every pipe table of ``text`` as (header cells, rows of cells)."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", lines[i + 1]) \
                and "-" in lines[i + 1]:
            header, rows, i = _cells(lines[i]), [], i + 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def _markdown_files(roots, pattern: str):
    for root in map(Path, roots):
        yield from [root] if root.is_file() else sorted(root.rglob(pattern)) if root.is_dir() else []


def find_tables(header_start, roots, pattern: str = "*.md") -> list[list[dict]]:
    """Every table whose header begins with the cells ``header_start``, in the Markdown files under
    ``roots`` (files or folders, in order): a list of tables, each a list of rows (dicts keyed by
    the header cells)."""
    header_start = [cell.strip() for cell in header_start]
    found = []
    for path in _markdown_files(roots, pattern):
        for header, rows in markdown_tables(path.read_text(encoding="utf-8")):
            if header[:len(header_start)] == header_start:
                found.append([dict(zip(header, row)) for row in rows])
    return found


def find_table(header_start, roots, pattern: str = "*.md") -> list[dict]:
    """The rows of the first table :func:`find_tables` finds; a LookupError names what was searched
    when none matches."""
    found = find_tables(header_start, roots, pattern)
    if not found:
        raise LookupError(f"no table with a header starting {' | '.join(header_start)!r} in the Markdown files "
                          f"under {', '.join(map(str, roots))}")
    return found[0]


def number(cell: str) -> float:
    """The first number of a table cell (thousands commas and Markdown emphasis ignored); NaN if none."""
    match = _NUMBER.search(cell.replace("*", ""))
    return float(match.group().replace(",", "")) if match else float("nan")


def mean_std(cell: str) -> tuple[float, float]:
    """(mean, std) of a cell ``"88.44 ± 0.27"``; std 0 when the cell has one number."""
    parts = cell.replace("*", "").split("±")
    return number(parts[0]), (number(parts[1]) if len(parts) > 1 else 0.0)


def read_json(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
