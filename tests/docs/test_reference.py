"""The API reference of the docs site covers every public name: each name in ``galinear.__all__``
and in the ``__all__`` of every public subpackage (found on disk, imported here) has a page of
the generated reference (docs/_hooks/reference.py), and each page renders an object or points to
the page that does."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[2]


def _hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs" / "_hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)       # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def public_packages_on_disk() -> list[str]:
    """galinear and every package below it without a leading underscore in its path."""
    found = []
    for init in sorted((ROOT / "galinear").rglob("__init__.py")):
        parts = init.parent.relative_to(ROOT).parts
        if not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return found


def test_every_public_name_has_a_page():
    hook = _hook()
    pages = {(page.package, page.name): page for page in hook.reference_pages()}
    missing, packages_with_all = [], []
    for package in public_packages_on_disk():
        try:
            module = importlib.import_module(package)
        except ImportError as error:   # an optional dependency missing: that package's names are skipped
            pytest.skip(f"{package} needs {error.name}")
        names = getattr(module, "__all__", None)
        if names is None:
            continue
        packages_with_all.append(package)
        missing += [f"{package}.{name}" for name in names if (package, name) not in pages]
    assert "galinear" in packages_with_all and "galinear.nn" in packages_with_all
    assert not missing, f"names without a reference page: {missing}"


def test_each_page_renders_its_object_or_points_to_the_page_that_does():
    hook = _hook()
    pages = hook.reference_pages()
    by_path = {page.public_path: page for page in pages}
    packages = hook.public_packages()
    rendered = [page.target for page in pages if page.target is not None]
    assert len(rendered) == len(set(rendered)), "an object is rendered on two pages"
    for page in pages:
        if page.target is None:
            assert page.same_as in packages or by_path[page.same_as].target is not None, page
    markdown = hook.all_markdown()
    assert markdown["reference/galinear/nn/RotorLinear.md"].startswith("::: galinear.nn.RotorLinear")
    assert "galinear.core.Algebra" in markdown["reference/galinear/Algebra.md"]
    assert all(page.uri in markdown for page in pages)
