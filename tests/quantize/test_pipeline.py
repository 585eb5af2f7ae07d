"""The whole quantization of a tiny random Llama: every family with GPTQ, quantized activations and KV
cache, a learned rotation trained and checkpointed; at 8 bits the model stays close to the original."""
import copy

import pytest
import torch

from galinear.quantize.config import QuantizeConfig
from galinear.quantize.cost import online_cost
from galinear.quantize.pipeline import quantize_model
from galinear.testing.models import tiny_llama


@pytest.mark.parametrize("family", [pytest.param("none", marks=pytest.mark.slow),
                                    pytest.param("hadamard", marks=pytest.mark.slow), "rotor"])
def test_gptq_with_quantized_activations_and_cache(family, tmp_path):
    original = tiny_llama(2)
    model = copy.deepcopy(original)
    generator = torch.Generator().manual_seed(0)
    calib = [torch.randint(0, 64, (32,), generator=generator) for _ in range(3)]
    config = QuantizeConfig(wbits=8, abits=8, kvbits=8, method="gptq", steps=2, layers_per_step=1, rows_per_step=8,
                            out_dir=str(tmp_path))
    result = quantize_model(model, config, family, seed=0, calib=calib)
    assert result["online"] == (family != "none")
    assert len(result["clips"]) == 2 * 7 and all(0.5 <= r <= 1.0 for r in result["clips"].values())
    ids = torch.randint(0, 64, (1, 24), generator=generator)
    with torch.no_grad():
        a, b = original(ids).logits, model(ids).logits
    assert torch.isfinite(b).all()
    assert float((a - b).abs().max()) < 0.1 * float(a.abs().max())  # 8 bits everywhere: close
    if family == "rotor":
        assert result["training"]["steps"] == 2 and (tmp_path / "calibration").is_dir()
        assert result["rotation_parameters"] == 2 * 10  # one chunk of 32 = Cl(5): two bivectors of C(5, 2)
        cost = online_cost(model, tokens=8, repeats=1)
        assert cost["width"] == 64 and cost["online_hadamard_ms"] > 0 and cost["layer_ms"] > 0


def test_a_rerun_keeps_the_finished_rows_and_refuses_other_settings(tmp_path):
    from galinear import _io
    from galinear.quantize.study import _finished_rows, _settings

    config = QuantizeConfig(out_dir=str(tmp_path), seeds=(0,))
    path = str(tmp_path / "results.json")
    assert _finished_rows(path, config) == ({}, None)
    rows = [{"family": "float (not quantized)", "seed": None, "wikitext_ln_ppl": 3.0},
            {"family": "hadamard", "seed": 0, "wikitext_ln_ppl": 4.0}]
    _io.save_json(path, {"settings": _settings(config), "rows": rows, "online": {"tokens": 8}})
    more = QuantizeConfig(out_dir=str(tmp_path), seeds=(0, 1, 2), rotations=("hadamard", "rotor"), threads=1)
    done, online = _finished_rows(path, more)  # more seeds and families: the same study, extended
    scored = {"wikitext_windows": 8, "accuracy_items": 0}  # rows of a file from before rows recorded it: its settings
    assert done == {"float": {**rows[0], "scored": scored}, ("hadamard", 0): {**rows[1], "scored": scored}}
    assert online == {"tokens": 8}
    assert _finished_rows(path, QuantizeConfig(out_dir=str(tmp_path), accuracy_items=100))[0] == done  # scoring only
    with pytest.raises(ValueError, match=r"other settings \(steps, wbits differ\); give another --out"):
        _finished_rows(path, QuantizeConfig(out_dir=str(tmp_path), wbits=3, steps=5))
