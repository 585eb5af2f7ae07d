"""docs/tour.py, the tour as a Jupytext percent script, runs to the end (each cell asserts its result)."""
from __future__ import annotations

import re
import runpy
from pathlib import Path

TOUR = Path(__file__).resolve().parents[2] / "docs" / "tour.py"


def test_the_tour_is_a_percent_script_with_markdown_and_code_cells():
    text = TOUR.read_text(encoding="utf-8")
    assert "formats: py:percent" in text
    cells = re.findall(r"^# %%( \[markdown\])?$", text, re.M)
    assert cells.count(" [markdown]") >= 5 and cells.count("") >= 5


def test_the_tour_script_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(TOUR), run_name="__main__")
    assert "all checks passed" in capsys.readouterr().out
