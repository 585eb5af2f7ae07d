"""The compression pipeline end to end on a tiny random Llama (no download)."""
import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study, load_compressed
from galinear.compress.fitting import activations, projection, surgery
from galinear.compress.storage import checkpoints
from galinear.lm import models  # noqa: E402
from galinear.lm.perplexity import heldout_log_perplexity  # noqa: E402
from galinear.lm.windows import split_windows  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, reference_log_perplexity, tiny_llama  # noqa: E402


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-11)])
def test_log_ppl_two_ways(dtype, tol):
    """Windowed strided loss == direct sum of -ln p(token | its own prefix), token by token."""
    model = tiny_llama(layers=2, seed=3, dtype=dtype)
    tokens = np.asarray(CharTokenizer()(TEXTS["a"])["input_ids"])
    w = split_windows(tokens, 24, 8, 0.3, seed=1, group=3, max_heldout=3)
    assert not w.heldout_first.all()  # both scoring rules are exercised
    windowed = heldout_log_perplexity(model, w)
    direct = reference_log_perplexity(model, [(w.batch([s])[0], w.score_from(i)) for i, s in enumerate(w.heldout)])
    assert windowed["tokens"] == sum(24 - w.score_from(i) for i in range(len(w.heldout)))
    assert abs(windowed["log_ppl"] - direct) <= tol * max(1.0, abs(direct))
    # an untrained 64-token model is close to uniform: ln PPL near ln 64
    assert abs(direct - np.log(64)) < 0.5


def test_skipping_untouched_layers_is_exact():
    model = tiny_llama(layers=3, seed=1)
    tokens = np.asarray(CharTokenizer()(TEXTS["b"])["input_ids"])
    w = split_windows(tokens, 32, 16, 0.3, seed=0, group=2, max_heldout=4)
    assert activations.skip_is_exact(model, w.batch(w.heldout[:1])[0], 2)
    residual = activations.residual_inputs(model, 2, w.batch(w.heldout))
    full = heldout_log_perplexity(model, w)["log_ppl"]
    skipped = heldout_log_perplexity(model, w, start=(2, residual))["log_ppl"]
    assert abs(full - skipped) < 1e-5


def test_cosine_schedule_anneals_once():
    """lr_t = lr (1 + cos(pi t / T)) / 2 over all T steps of the run: the last step's rate is that of t = T - 1."""
    module = torch.nn.Linear(4, 3, bias=False)
    x = torch.randn(300, 4)
    stats = projection.fit_projection(module, x, x, torch.randn(3, 4), lr=0.05, epochs=2, batch_size=64)
    assert stats["steps"] == 10 and abs(stats["lr_last"] - 0.05 * (1 + math.cos(math.pi * 9 / 10)) / 2) < 1e-12


def test_end_to_end_study(tmp_path, tiny):
    config = tiny_config(tmp_path / "run", methods=("dense", "zero", "lr1", "lr4", "bh1", "rotor"), hidden=16,
                         layer_sets=((0, 2),), epochs=4.0)
    study = Study(config, tiny, texts=TEXTS)
    results = study.run()
    entries = results["entries"]
    # original + 6 methods x 1 layer set, on both texts
    assert len(entries) == 2 + 6 * 2
    for e in entries.values():
        assert np.isfinite(e["log_ppl"]) and e["tokens"] > 0
    original = {d: entries[f"original|{d}"]["log_ppl"] for d in ("a", "b")}
    same_windows = {e["tokens"] for e in entries.values() if e["dataset"] == "a"}
    assert len(same_windows) == 1  # every model is scored on the same held-out tokens
    dense = [e for e in entries.values() if e["method"] == "dense"]
    lr1 = [e for e in entries.values() if e["method"] == "lr1"]
    for e in dense:  # the full-matrix sanity baseline stays near the original
        assert abs(e["log_ppl"] - original[e["dataset"]]) < 0.05
        assert e["params_per_layer"] == e["dense_params_per_layer"] == 32 * 32 + 2 * 32 * 16
    assert lr1[0]["params_per_layer"] == (32 + 32) + 2 * (32 + 16)
    zero = [e for e in entries.values() if e["method"] == "zero"]
    assert zero[0]["params_per_layer"] == 0 and zero[0]["test_rel_mse"]["q_proj"] == pytest.approx(1.0)
    # reports
    for name in ("results.json", "summary.json", "results.md", "logppl_vs_params.png"):
        assert os.path.exists(tmp_path / "run" / name), name
    table = (tmp_path / "run" / "results.md").read_text()
    # the note on Wikipedia / Shakespeare / KJV standing in for the paper's texts only where they ran
    assert "Wikitext-2" not in table and "| 0,2 | rotor |" in table
    # the claim table compares the rotor network with the best LR4 / BH1 and LR1 fits on each text
    claim = table[table.index("## The paper's claim"):]
    assert claim.count("\n| 0,2 | ") == 2 and ("LR4 Adam" in claim or "BH1 Adam" in claim)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {r["method"] for r in summary["rows"]} == {"original", "dense", "zero", "lr1", "lr4", "bh1", "rotor"}
    # captures are keyed by the network they came from: the pair's layer 2 has one capture per method
    captures = os.listdir(os.path.join(study.work, "captures"))
    for tag in ("dense", "zero", "lr1", "lr4", "bh1", "rotor"):
        assert sum(c.startswith(tag) and c.endswith("attn_in-L2.safetensors") for c in captures) == 1, (tag, captures)
    # a kept compressed model (a folder, the only model format a run writes) reloads into a fresh
    # copy with the same perplexity
    saved = tmp_path / "run" / "models"
    assert sorted(os.listdir(saved)) == sorted(["index.json"] + json.loads((saved / "index.json").read_text())["models"])
    assert all((saved / f / "galinear_compressed.json").is_file() for f in os.listdir(saved) if f != "index.json")
    rotor_folder = [f for f in os.listdir(saved) if f.startswith("rotor") and f.endswith("L0+2")][0]
    fresh = tiny_llama()
    load_compressed(fresh, str(saved / rotor_folder))
    assert type(models.projection(fresh, 2, "k_proj")).__name__ == "RotorNetwork"
    reloaded = heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"]
    key = [k for k, e in entries.items() if e["method"] == "rotor" and e["layers"] == [0, 2] and e["dataset"] == "a"][0]
    assert reloaded == pytest.approx(entries[key]["log_ppl"], abs=1e-6)


def test_inputs_come_from_the_partly_compressed_network(tmp_path, tiny):
    """Layer 2's training inputs are captured with layer 0 already replaced; targets stay original."""
    study = Study(tiny_config(tmp_path, methods=("lr1",), layer_sets=((0, 2),)), tiny, texts=TEXTS)
    spec = study.config.method_spec("lr1")
    fitted = study.fit_layer_set(spec, 0, (0, 2))
    original_inputs, _ = study.captures.original(2)
    layer0 = {k: v for k, v in fitted.replacements.items() if k[0] == 0}
    with surgery.swapped(study.model, layer0):
        expected = activations.capture(study.model, 2, study.captures.train_ids())
    cached = [f for f in os.listdir(os.path.join(study.work, "captures")) if f.endswith("attn_in-L2.safetensors") and f.startswith("lr1")]
    captured = checkpoints.load(os.path.join(study.work, "captures", cached[0]))["train"]
    assert torch.allclose(captured, expected)
    assert not torch.allclose(captured, original_inputs, atol=1e-3)
    # the model is restored after surgery
    assert isinstance(models.projection(study.model, 0, "q_proj"), torch.nn.Linear)


def test_resume_after_interruption_reproduces_result(tmp_path, monkeypatch, tiny):
    reference = Study(tiny_config(tmp_path / "ref", datasets=("a",)), tiny, texts=TEXTS).run()
    calls = {"n": 0}
    real_fit = projection.fit_projection

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(projection, "fit_projection", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Study(tiny_config(tmp_path / "resumed", datasets=("a",)), tiny, texts=TEXTS).run()
    monkeypatch.setattr(projection, "fit_projection", real_fit)
    # four finished units are on disk and are not refitted
    counted = {"n": 0}

    def counting(*args, **kwargs):
        counted["n"] += 1
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(projection, "fit_projection", counting)
    resumed = Study(tiny_config(tmp_path / "resumed", datasets=("a",)), tiny, texts=TEXTS).run()
    total_units = 2 * (3 + 6)  # 2 methods x (layer 1; layers 0 and 2) x q/k/v
    assert counted["n"] == total_units - 4
    for key, entry in reference["entries"].items():
        assert resumed["entries"][key]["log_ppl"] == entry["log_ppl"], key
    # a third run does nothing at all
    counted["n"] = 0
    Study(tiny_config(tmp_path / "resumed", datasets=("a",)), tiny, texts=TEXTS).run()
    assert counted["n"] == 0


def test_plan_runs_every_seed_of_the_first_set_then_covers_all_sets(tmp_path, tiny):
    config = tiny_config(tmp_path, layer_sets=((1,), (2,), (0, 2)), methods=("lr1",), seeds=(0, 1), multi_seeds=(0,))
    plan = Study(config, tiny, texts=TEXTS).plan()
    assert plan == [("lr1", 0, (1,)), ("lr1", 1, (1,)), ("lr1", 0, (2,)), ("lr1", 0, (0, 2)), ("lr1", 1, (2,))]


def test_o_proj_refit(tmp_path, tiny):
    """With --refit-o-proj each replaced layer gets a dense o_proj fitted to the original outputs."""
    config = tiny_config(tmp_path, methods=("lr1",), layer_sets=((0, 2),), datasets=("a",), refit_o_proj=True,
                         o_epochs=3.0)
    study = Study(config, tiny, texts=TEXTS)
    entries = study.run()["entries"]
    fitted = study.fit_layer_set(study.config.method_spec("lr1"), 0, (0, 2))
    for layer in (0, 2):
        o_proj = fitted.replacements[(layer, "o_proj")]
        original = models.projection(study.model, layer, "o_proj")
        assert isinstance(o_proj, torch.nn.Linear) and o_proj is not original
        assert not torch.equal(o_proj.weight, original.weight)  # it moved from its warm start
        assert fitted.stats[(layer, "o_proj")].steps == 3
    entry = [e for e in entries.values() if e["method"] == "lr1"][0]
    assert np.isfinite(entry["log_ppl"])
    saved = [f for f in os.listdir(tmp_path / "models") if f != "index.json"]
    fresh = tiny_llama()
    installed = load_compressed(fresh, str(tmp_path / "models" / saved[0]))
    assert (2, "o_proj") in installed
    assert heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"] == pytest.approx(entry["log_ppl"], abs=1e-6)


def test_refit_study_shares_first_layer_fits(tmp_path, tiny, monkeypatch):
    """--cache: a study with --refit-o-proj given the cache of the same study without it refits only
    what the refit changes (o_proj, and q/k/v behind a refitted layer), with the results of a
    study that has its own cache."""
    common = dict(methods=("lr1",), layer_sets=((1,), (0, 2)), datasets=("a",), o_epochs=2.0)
    plain = Study(tiny_config(tmp_path / "plain", **common), tiny, texts=TEXTS).run()
    alone = Study(tiny_config(tmp_path / "alone", refit_o_proj=True, **common), tiny, texts=TEXTS).run()
    real_fit = projection.fit_projection
    fitted = []

    def counting(module, *args, **kwargs):
        fitted.append(tuple(module.weight.shape) if isinstance(module, torch.nn.Linear) else "q/k/v")
        return real_fit(module, *args, **kwargs)

    monkeypatch.setattr(projection, "fit_projection", counting)
    shared = Study(tiny_config(tmp_path / "shared", refit_o_proj=True, cache_dir=str(tmp_path / "plain" / "cache"),
                               **common), tiny, texts=TEXTS).run()
    o_refits = 3  # layer 1; layers 0 and 2
    assert len(fitted) == o_refits + 3  # and the q/k/v of layer 2 behind the refitted layer 0
    assert not os.path.exists(tmp_path / "shared" / "cache")
    for key, entry in alone["entries"].items():
        assert shared["entries"][key]["log_ppl"] == entry["log_ppl"], key
    # the refit changed the answer, so the shared fits were not mistaken for refitted ones
    assert any(plain["entries"][k]["log_ppl"] != alone["entries"][k]["log_ppl"] for k in plain["entries"]
               if not k.startswith("original"))


def test_capture_from_the_residual_stream_equals_the_full_forward():
    """An o_proj capture behind a replaced layer started at that layer's residual input equals the
    capture through the whole stack (the study uses it for every o_proj refit of a first layer)."""
    model = tiny_llama(layers=3, seed=4)
    tokens = np.asarray(CharTokenizer()(TEXTS["a"])["input_ids"])
    w = split_windows(tokens, 32, 16, 0.3, seed=0, group=2, max_train=4)
    ids = w.batch(w.train)
    replaced = {(2, "q_proj"): torch.nn.Linear(32, 32, bias=False)}
    residuals = activations.residual_inputs(model, 2, ids)
    with surgery.swapped(model, replaced):
        full = activations.capture(model, 2, ids, where="o_in")
        started = activations.capture(model, 2, ids, where="o_in", residuals=residuals)
    assert full.shape == (len(ids) * 32, 32)
    assert torch.equal(started, full)  # the same operations on the same inputs
    assert len(model.model.layers) == 3  # the stack is whole again


def test_threads_auto_lets_the_governor_choose_every_fit_step(tmp_path, tiny):
    """--threads auto: a ThreadGovernor drives every fit of the study; the results are those of
    a study at a fixed count up to the rounding of a different thread count."""
    from galinear.compress.study.config import check
    from galinear.optim import threads as thread_policy

    before = torch.get_num_threads()
    fixed = Study(tiny_config(tmp_path / "fixed", methods=("lr1",), layer_sets=((0,),), threads=1), tiny,
                  texts=TEXTS).run()
    try:
        study = Study(tiny_config(tmp_path / "auto", methods=("lr1",), layer_sets=((0,),), threads="auto"), tiny,
                      texts=TEXTS)
        assert thread_policy.active() is study.governor
        assert study.governor.most == (os.cpu_count() or 1)
        results = study.run()
        assert study.governor.steps > 0  # every fit step went through it
    finally:
        thread_policy.use(None)
        torch.set_num_threads(before)
    for key, entry in fixed["entries"].items():
        assert results["entries"][key]["log_ppl"] == pytest.approx(entry["log_ppl"], rel=1e-4)
    with pytest.raises(ValueError, match="--threads must be a positive integer or 'auto', got 'x'"):
        check(tiny_config(tmp_path, threads="x"), loaded=True)
