"""The gallery: every example runs and writes its picture, the page shows each one with its script,
and the committed results the result pictures read are found."""
import importlib.util
import time
from pathlib import Path

import pytest

from galinear.plot.results import find_table, find_tables, markdown_tables, mean_std, number

GALLERY = Path(__file__).resolve().parents[2] / "docs" / "gallery"


def _build():
    spec = importlib.util.spec_from_file_location("gallery_build", GALLERY / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_runs_and_writes_its_picture(tmp_path, monkeypatch):
    build = _build()
    scripts = build.examples()
    assert len(scripts) >= 10
    monkeypatch.setenv("GALLERY_OUT", str(tmp_path))
    start = time.perf_counter()
    seconds = build.run(scripts, tmp_path)
    elapsed = time.perf_counter() - start
    for script in scripts:
        names = build.outputs(script)
        assert names, f"{script.name} saves no picture"
        for name in names:
            assert (tmp_path / name).stat().st_size > 10_000, name
    assert elapsed < 120, seconds  # about 40 s on 2 busy cores


def test_the_page_shows_every_picture_with_its_script():
    build = _build()
    scripts = build.examples()
    page = (GALLERY / "index.md").read_text(encoding="utf-8")
    assert page == build.index(scripts), "docs/gallery/index.md is stale: run make gallery"
    for script in scripts:
        assert f"docs/gallery/{script.name}" in page
        for name in build.outputs(script):
            assert f"(images/{name})" in page
            assert (GALLERY / "images" / name).is_file()


def test_markdown_tables_are_read(tmp_path):
    text = ("intro\n\n| model | parameters | acc. |\n|---|---|---|\n| rotor | 17,458 | **88.44 ± 0.27** |\n"
            "| dense | 1,863,690 | 90.14 |\n\ntext\n\n| model | parameters | acc. |\n|:--|--:|---|\n| x | 1 | 2 |\n")
    (tmp_path / "a.md").write_text(text)
    assert len(markdown_tables(text)) == 2
    rows = find_table(["model", "parameters"], [tmp_path])
    assert [number(r["parameters"]) for r in rows] == [17458.0, 1863690.0]
    assert mean_std(rows[0]["acc."]) == (88.44, 0.27) and mean_std(rows[1]["acc."]) == (90.14, 0.0)
    assert len(find_tables(["model"], [tmp_path])) == 2
    with pytest.raises(LookupError, match="no table"):
        find_table(["nothing"], [tmp_path])
