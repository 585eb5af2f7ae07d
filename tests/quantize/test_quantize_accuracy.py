"""The accuracy column: lm-eval's HFLM scores a quantized model (activation quantizers, the KV cache
quantized after RoPE with R3 through the registered attention function) on the next-sentence items,
and its per-choice log-likelihoods and acc equal the ones computed here directly with the same model."""
import copy
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval", reason="lm-eval is not installed: pip install galinear[eval]")

from galinear.data.choice import next_sentence_items  # noqa: E402
from galinear.lm import wikitext  # noqa: E402
from galinear.quantize import attention  # noqa: E402
from galinear.quantize.config import QuantizeConfig  # noqa: E402
from galinear.quantize.pipeline import quantize_model  # noqa: E402
from galinear.quantize.study import accuracy  # noqa: E402
from galinear.testing.folders import char_tokenizer  # noqa: E402
from galinear.testing.models import reference_log_likelihood, tiny_llama  # noqa: E402


def test_lm_eval_scores_the_quantized_model_as_it_runs_here(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    tokenizer = char_tokenizer()
    model = copy.deepcopy(tiny_llama(2))
    # one token a character: the items need longer windows than the tiny model's 128 (RoPE has no limit)
    model.config.max_position_embeddings = 2048
    generator = torch.Generator().manual_seed(0)
    calib = [torch.randint(0, 64, (32,), generator=generator) for _ in range(2)]
    config = QuantizeConfig(wbits=4, abits=6, kvbits=4, steps=0)
    quantize_model(model, config, "hadamard", seed=0, calib=calib)
    assert attention.kv_quantizer(model)["kvbits"] == 4 and attention.kv_quantizer(model)["r3"] is not None

    items = 6
    scores = accuracy(model, tokenizer, items, batch_size=4)
    docs = next_sentence_items(wikitext.read_file(), items, seed=0)
    correct = 0
    for doc in docs:
        ours = [reference_log_likelihood(model, tokenizer, doc["context"], " " + c) for c in doc["choices"]]
        correct += max(range(len(ours)), key=ours.__getitem__) == doc["label"]
    assert scores["items"] == items
    assert math.isclose(scores["acc"], correct / items)
    assert 0.0 <= scores["acc_norm"] <= 1.0
