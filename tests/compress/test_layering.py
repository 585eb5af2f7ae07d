"""The order of galinear.compress's parts: the study's values and steps (galinear.compress.study)
import neither the reports nor the orchestrator; the reports read the study's values; the
orchestrator (galinear.compress.orchestrator) sits above both."""
import ast
from pathlib import Path

import galinear.compress

ROOT = Path(galinear.compress.__file__).parent


def imported(path: Path) -> set:
    """Every module ``path`` imports, at any depth of the file (lazy imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return out


def test_the_study_imports_no_report_and_no_orchestrator():
    found = {(path.name, name) for path in (ROOT / "study").glob("*.py") for name in imported(path)
             if name.startswith(("galinear.compress.report", "galinear.compress.orchestrator"))}
    assert not found, found


def test_the_reports_import_no_orchestrator():
    found = {(path.name, name) for path in (ROOT / "report").glob("*.py") for name in imported(path)
             if name.startswith("galinear.compress.orchestrator")}
    assert not found, found
