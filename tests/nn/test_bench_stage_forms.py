"""benchmarks/bench_stage_forms.py: a smoke run (every contender timed, the spinor form's total the
sum of its parts) and its refusal of bad settings."""
import re

import pytest

@pytest.fixture(autouse=True)
def _threads_restored():
    """The script sets torch's and numba's thread counts for this process: put them back."""
    import numba
    import torch

    counts = torch.get_num_threads(), numba.get_num_threads()
    yield
    torch.set_num_threads(counts[0])
    numba.set_num_threads(counts[1])


def test_smoke_run_times_every_contender(benchmark_script, capsys):
    benchmark_script("bench_stage_forms").main(["--tokens", "64", "--repeats", "1", "--no-write"])
    out = capsys.readouterr().out
    ms = {name: float(value) for name, value in re.findall(r"^\| ([^|]+?) \| ([0-9.]+) \|", out, re.M)}
    assert set(ms) == {"parity blocks: product", "spinor form: product", "spinor form: input to its matrix",
                       "spinor form: outputs from theirs", "spinor form: product and transforms"}
    parts = sum(v for k, v in ms.items() if k.startswith("spinor form:") and k != "spinor form: product and transforms")
    assert ms["spinor form: product and transforms"] == pytest.approx(parts, abs=2e-3)
    assert "1.00x" in out


def test_refuses_a_count_below_one(benchmark_script, capsys):
    with pytest.raises(SystemExit) as stop:
        benchmark_script("bench_stage_forms").main(["--tokens", "0", "--no-write"])
    assert stop.value.code == 2 and "--tokens must be at least 1" in capsys.readouterr().err
