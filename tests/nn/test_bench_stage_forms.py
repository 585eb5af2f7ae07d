"""benchmarks/bench_stage_forms.py: a smoke run (every contender timed, the spinor form's total the
sum of its parts) and its refusal of bad settings."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stage_forms.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_smoke_run_times_every_contender():
    done = _run("--tokens", "64", "--repeats", "1", "--no-write")
    assert done.returncode == 0, done.stderr
    ms = {name: float(value) for name, value in re.findall(r"^\| ([^|]+?) \| ([0-9.]+) \|", done.stdout, re.M)}
    assert set(ms) == {"parity blocks: product", "spinor form: product", "spinor form: input to its matrix",
                       "spinor form: outputs from theirs", "spinor form: product and transforms"}
    parts = sum(v for k, v in ms.items() if k.startswith("spinor form:") and k != "spinor form: product and transforms")
    assert ms["spinor form: product and transforms"] == pytest.approx(parts, abs=2e-3)
    assert "1.00x" in done.stdout


def test_refuses_a_count_below_one():
    done = _run("--tokens", "0", "--no-write")
    assert done.returncode == 2 and "--tokens must be at least 1" in done.stderr
