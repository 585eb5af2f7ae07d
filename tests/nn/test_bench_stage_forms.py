"""benchmarks/bench_stage_forms.py: a smoke run (every contender timed, the spinor form's total the
sum of its parts) and its refusal of bad settings."""
import importlib.util
import re
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stage_forms.py"


def _bench():
    """The script, loaded from the checkout (benchmarks are not part of the package)."""
    spec = importlib.util.spec_from_file_location("bench_stage_forms", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _threads_restored():
    """The script sets torch's and numba's thread counts for this process: put them back."""
    import numba
    import torch

    counts = torch.get_num_threads(), numba.get_num_threads()
    yield
    torch.set_num_threads(counts[0])
    numba.set_num_threads(counts[1])


def test_smoke_run_times_every_contender(capsys):
    _bench().main(["--tokens", "64", "--repeats", "1", "--no-write"])
    out = capsys.readouterr().out
    ms = {name: float(value) for name, value in re.findall(r"^\| ([^|]+?) \| ([0-9.]+) \|", out, re.M)}
    assert set(ms) == {"parity blocks: product", "spinor form: product", "spinor form: input to its matrix",
                       "spinor form: outputs from theirs", "spinor form: product and transforms"}
    parts = sum(v for k, v in ms.items() if k.startswith("spinor form:") and k != "spinor form: product and transforms")
    assert ms["spinor form: product and transforms"] == pytest.approx(parts, abs=2e-3)
    assert "1.00x" in out


def test_refuses_a_count_below_one(capsys):
    with pytest.raises(SystemExit) as stop:
        _bench().main(["--tokens", "0", "--no-write"])
    assert stop.value.code == 2 and "--tokens must be at least 1" in capsys.readouterr().err
