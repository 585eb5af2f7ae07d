"""benchmarks/bench_quantize_rotation.py: every contender runs on a tiny Llama (R1 fused) and a tiny
Gemma-3 (R1 online), the ratios are per decoder layer, a smoke run beside a busy process, and its
refusal of bad settings."""
import re

import pytest
import torch

from galinear.testing.models import tiny_gemma, tiny_llama


@pytest.mark.parametrize("build,online", [(tiny_llama, False), (tiny_gemma, True)])
def test_every_contender_runs_and_names_what_it_sits_beside(benchmark_script, build, online):
    bench = benchmark_script("bench_quantize_rotation")
    model = build()
    calls, beside = bench.contenders(model, 8)
    with torch.no_grad():
        for fn in calls.values():
            fn()
    r3 = [name for name in calls if name.startswith("R3 ")]
    qk = [name for name in calls if name.startswith("q_proj + k_proj (")]
    assert len(r3) == 2 and len(qk) == 1 and all(beside[name] == (1, (qk[0],)) for name in r3)
    heads, kv = model.config.num_attention_heads, model.config.num_key_value_heads
    assert all(f"q ({heads} heads) and k ({kv})" in name for name in r3)
    r1 = [name for name in calls if name.startswith("R1 ")]
    assert {name.split()[1] for name in r1} == {"hadamard", "cayley", "butterfly", "rotor"}
    assert all(beside[name] == (2, ("q_proj + k_proj + v_proj", "gate_proj + up_proj")) for name in r1)
    assert all((" online: " in name) == online for name in r1 if "dense" not in name.split(":")[0])
    assert all(other in calls for _, next_to in beside.values() for other in next_to)
    assert bench.LAYER in calls and bench.LAYER not in beside


def test_rows_are_per_decoder_layer(benchmark_script):
    bench = benchmark_script("bench_quantize_rotation")
    ms = {"r1": 1.0, "qkv": 2.0, "mlp": 3.0, bench.LAYER: 10.0}
    table = bench.rows(ms, {"r1": (2, ("qkv", "mlp"))})
    assert table[0] == ["r1", 1.0, 2, "qkv and mlp", pytest.approx(2 / 5), pytest.approx(0.2)]
    assert table[1] == ["qkv", 2.0, 1, None, None, pytest.approx(0.2)]


def test_smoke_run_beside_a_busy_process(benchmark_script, monkeypatch, capsys):
    import galinear.lm
    from galinear.lm.models import LoadedModel

    bench = benchmark_script("bench_quantize_rotation")
    monkeypatch.setattr(galinear.lm, "load_model", lambda source: LoadedModel(tiny_llama(), None, source))
    monkeypatch.setattr(bench, "set_threads", lambda count: None)  # this process's thread counts stay as they are
    bench.main(["--tokens", "4", "--repeats", "1", "--busy", "--no-write"])
    out = capsys.readouterr().out
    assert "beside one busy process" in out and "R1 is fused into the weights" in out
    ms = {name: float(value) for name, value in re.findall(r"^\| ([^|]+?) \| ([0-9.]+) \|", out, re.M)}
    assert len(ms) == 17 and all(v > 0 for v in ms.values())
    assert re.search(r"^\| one decoder layer \| [0-9.]+ \| 1 \| - \| - \| 1\.000 \|$", out, re.M)


def test_refuses_a_count_below_one(benchmark_script, capsys):
    with pytest.raises(SystemExit) as stop:
        benchmark_script("bench_quantize_rotation").main(["--tokens", "0", "--no-write"])
    assert stop.value.code == 2 and "--tokens must be at least 1" in capsys.readouterr().err
