"""lm-eval evaluates a compressed model: HFLM over the model galinear.compress.load returns, on a
multiple-choice task defined by a local YAML file and JSONL data (no hub), and its scores equal the
log-likelihoods computed here directly."""
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval", reason="lm-eval is not installed: pip install galinear[eval]")

from galinear.compress import load, register
from galinear.compress.storage import transformers_auto
from galinear.compress.methods import catalogue as methods
from galinear.lm import models  # noqa: E402
from galinear.testing.compression import kept_folder  # noqa: E402
from galinear.data.choice import write_lm_eval_task  # noqa: E402
from galinear.testing.folders import tiny_model_folder  # noqa: E402
from galinear.testing.models import reference_log_likelihood  # noqa: E402

DOCS = [
    {"context": "the cat sat on the", "choices": ["mat", "sky", "sea", "car"], "label": 0},
    {"context": "a bird can", "choices": ["fly", "read", "cook", "swim"], "label": 0},
    {"context": "we drink", "choices": ["rocks", "water", "paper", "glass"], "label": 1},
    {"context": "snow is", "choices": ["black", "green", "white", "loud"], "label": 2},
    {"context": "the sun is", "choices": ["cold", "wet", "small", "hot"], "label": 3},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(compressed folder, base model folder, task folder) under one temporary root."""
    root = tmp_path_factory.mktemp("lm_eval")
    base = tiny_model_folder(root / "base")
    folder = kept_folder(root / "keep", base, methods.MethodSpec("rotor", hidden=16), name="tiny")
    tasks = write_lm_eval_task(str(root / "tasks"), DOCS, name="tiny_choice")  # the route users take
    return folder, base, tasks


def _evaluate(lm, tasks):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=tasks, include_defaults=False)
    return simple_evaluate(model=lm, tasks=["tiny_choice"], task_manager=manager, bootstrap_iters=0,
                           log_samples=True, random_seed=0)


def test_lm_eval_scores_a_compressed_model_on_a_local_task(setup, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    folder, _, tasks = setup
    model, tokenizer = load(folder, with_tokenizer=True)
    assert type(models.projection(model, 0, "k_proj")).__name__ == "RotorNetwork"
    results = _evaluate(HFLM(pretrained=model, tokenizer=tokenizer, device="cpu", batch_size=4), tasks)
    samples = sorted(results["samples"]["tiny_choice"], key=lambda s: s["doc_id"])
    assert len(samples) == len(DOCS)
    correct = 0
    for doc, sample in zip(DOCS, samples):
        ours = [reference_log_likelihood(model, tokenizer, doc["context"], " " + c) for c in doc["choices"]]
        theirs = [r[0][0] for r in sample["resps"]]
        assert theirs == pytest.approx(ours, abs=1e-4)
        correct += max(range(len(ours)), key=ours.__getitem__) == doc["label"]
    assert math.isclose(results["results"]["tiny_choice"]["acc,none"], correct / len(DOCS))


def test_lm_eval_loads_a_kept_folder_by_path_after_register(setup, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder, base, tasks = setup
    register()
    try:
        by_path = HFLM(pretrained=folder, tokenizer=base, device="cpu", batch_size=4)
    finally:
        transformers_auto.unregister()
    assert type(models.projection(by_path.model, 0, "q_proj")).__name__ == "RotorNetwork"
    model, tokenizer = load(folder, with_tokenizer=True)
    by_object = HFLM(pretrained=model, tokenizer=tokenizer, device="cpu", batch_size=4)
    first = _evaluate(by_path, tasks)["samples"]["tiny_choice"]
    second = _evaluate(by_object, tasks)["samples"]["tiny_choice"]
    key = (lambda s: s["doc_id"])
    assert [s["resps"] for s in sorted(first, key=key)] == [s["resps"] for s in sorted(second, key=key)]
