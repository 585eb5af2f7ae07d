"""The final joint distillation stage: its loss is the KL of two full forwards, it lowers the validation
KL, it resumes bit for bit after an interruption, and a study reports it as its own row."""
import glob
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study
from galinear.compress.fitting import distill
from galinear.compress.methods import catalogue as methods
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, tiny_llama  # noqa: E402


def _setup(seed=0):
    """A tiny model, rank-1 replacements of every layer's q/k/v, calibration and validation windows."""
    model = tiny_llama(layers=2, seed=seed)
    torch.manual_seed(seed + 1)
    spec = methods.MethodSpec("lr1")
    replacements = {}
    for layer in range(2):
        for proj in ("q_proj", "k_proj", "v_proj"):
            orig = getattr(model.model.layers[layer].self_attn, proj)
            module = methods.build_module(spec, orig.in_features, orig.out_features)
            module.eval()
            for p in module.parameters():
                p.requires_grad_(False)
            replacements[(layer, proj)] = module
    ids = np.asarray(CharTokenizer()(TEXTS["a"])["input_ids"], dtype=np.int64)
    windows = ids[:24 * 10].reshape(10, 24)
    return model, replacements, windows[:7], windows[7:]


def _kl_by_hand(model, replacements, ids):
    """Mean over tokens of sum_v p(v) (ln p(v) - ln q(v)), two full forwards in float64."""
    from galinear.compress.fitting import surgery

    with torch.no_grad():
        p = torch.log_softmax(model(input_ids=torch.as_tensor(ids)).logits.double(), -1)
        with surgery.swapped(model, replacements):
            q = torch.log_softmax(model(input_ids=torch.as_tensor(ids)).logits.double(), -1)
    return float((p.exp() * (p - q)).sum(-1).mean())


def test_loss_is_the_kl_of_two_forwards():
    model, replacements, train, valid = _setup()
    assert abs(distill.mean_kl(model, replacements, valid) - _kl_by_hand(model, replacements, valid)) < 1e-5
    assert distill.mean_kl(model, {}, valid) == 0.0  # nothing replaced: the distributions are the same


def test_distillation_lowers_the_validation_kl():
    model, replacements, train, valid = _setup()
    before = {k: {n: t.clone() for n, t in m.state_dict().items()} for k, m in replacements.items()}
    modules, stats = distill.distill(model, replacements, train, valid, lr=0.02, max_steps=40, eval_every=5,
                                     patience=3)
    start, best = _kl_by_hand(model, replacements, valid), _kl_by_hand(model, modules, valid)
    assert abs(stats["valid_kl_start"] - start) < 1e-5 and abs(stats["valid_kl"] - best) < 1e-5
    assert best < 0.8 * start  # a clear improvement, measured independently
    assert stats["curve"][0] == [0, stats["valid_kl_start"]] and stats["best_step"] > 0
    assert min(v for _, v in stats["curve"]) == stats["valid_kl"]  # the best check's parameters are kept
    for key, module in replacements.items():  # the inputs are untouched, the outputs frozen
        assert all(torch.equal(t, before[key][n]) for n, t in module.state_dict().items())
        assert not any(p.requires_grad for p in modules[key].parameters())
    assert all(not p.requires_grad for p in model.parameters())


def test_distillation_resumes_bit_for_bit(tmp_path, monkeypatch):
    model, replacements, train, valid = _setup(seed=3)
    settings = dict(lr=0.02, max_steps=24, eval_every=4, patience=2, seed=5)
    ref_modules, ref_stats = distill.distill(model, replacements, train, valid,
                                             checkpoint=str(tmp_path / "ref.pt"), **settings)
    real = distill.kl_loss
    calls = {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 14:  # inside step 11 (after the check at step 8 was written)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(distill, "kl_loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        distill.distill(model, replacements, train, valid, checkpoint=str(tmp_path / "run.pt"), **settings)
    monkeypatch.setattr(distill, "kl_loss", real)
    modules, stats = distill.distill(model, replacements, train, valid, checkpoint=str(tmp_path / "run.pt"),
                                     **settings)
    for key, module in ref_modules.items():
        for name, value in module.state_dict().items():
            assert torch.equal(value, modules[key].state_dict()[name]), (key, name)
    assert stats["curve"] == ref_stats["curve"] and stats["best_step"] == ref_stats["best_step"]
    # a finished stage is read back, not run again
    monkeypatch.setattr(distill, "kl_loss", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran again")))
    again, again_stats = distill.distill(model, replacements, train, valid, checkpoint=str(tmp_path / "run.pt"),
                                         **settings)
    assert again_stats["curve"] == ref_stats["curve"]
    assert all(torch.equal(v, again[k].state_dict()[n]) for k, m in ref_modules.items() for n, v in m.state_dict().items())


def test_bad_settings_are_refused():
    model, replacements, train, valid = _setup()
    with pytest.raises(ValueError, match="validation windows"):
        distill.distill(model, replacements, train, valid[:0])
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        distill.distill(model, replacements, train, valid, max_steps=0)
    with pytest.raises(ValueError, match="learning rate must be > 0"):
        distill.distill(model, replacements, train, valid, lr=0.0)


def test_study_reports_the_distilled_model(tmp_path, tiny):
    config = tiny_config(tmp_path / "run", datasets=("a",), layer_sets=(("all",),), methods=("lr1",), epochs=1.0,
                         distill=True, distill_max_steps=6, distill_eval_every=3, distill_lr=0.01, valid_windows=1)
    entries = Study(config, tiny, texts=TEXTS).run()["entries"]
    plain = entries["lr1-e1-lr0.05|s0|0+1+2|a"]
    kd = entries[f"lr1-e1-lr0.05-{distill.settings_tag(config)}|s0|0+1+2|a"]
    assert kd["distill"]["steps"] >= 3 and "distilled jointly" in kd["fit"]
    assert kd["distill"]["valid_kl"] <= kd["distill"]["valid_kl_start"]
    assert kd["params_per_layer"] == plain["params_per_layer"] and kd["log_ppl"] != plain["log_ppl"]
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert len([r for r in summary["rows"] if r["method"] == "lr1"]) == 2
    kept = tmp_path / "run" / "models" / f"lr1-e1-lr0.05-{distill.settings_tag(config)}-s0-L0+1+2"
    assert (kept / "galinear_compressed.json").is_file() and (kept / "replacements.safetensors").is_file()
    checkpoints = glob.glob(os.path.join(tmp_path, "run", "cache", "*", "distill", "*"))
    assert len(checkpoints) == 1 and checkpoints[0].endswith(f"-{distill.settings_tag(config)}.safetensors")


def test_a_finished_run_asked_again_with_save_keeps_its_models_and_a_lost_distilled_row_is_rerun(tmp_path, tiny):
    """Rows already evaluated do not hide the work still asked for: --save on a finished run writes
    the folders (from the cache, no new fit), and a run stopped after the fitted row but before the
    distilled one was recorded resumes with the distillation."""
    from galinear.compress import load
    from galinear.lm.perplexity import heldout_log_perplexity

    settings = dict(datasets=("a",), layer_sets=((1,),), methods=("lr1",), epochs=1.0, distill=True,
                    distill_max_steps=4, distill_eval_every=2, distill_lr=0.01, valid_windows=1)
    config = tiny_config(tmp_path / "run", **settings)
    first = Study(config, tiny, texts=TEXTS).run()["entries"]
    kd_key = f"lr1-e1-lr0.05-{distill.settings_tag(config)}|s0|1|a"
    again = tiny_config(tmp_path / "run", save_dir=str(tmp_path / "keep"), **settings)
    study = Study(again, tiny, texts=TEXTS)
    second = study.run()["entries"]
    assert {k: v["log_ppl"] for k, v in second.items()} == {k: v["log_ppl"] for k, v in first.items()}
    kept = sorted(p.name for p in (tmp_path / "keep").iterdir() if p.is_dir())
    assert kept == ["lr1-e1-lr0.05-kd4-v2-p4-lr0.01-s0-L1", "lr1-e1-lr0.05-s0-L1"]
    for folder, key in zip(kept, (kd_key, kd_key.replace(f"-{distill.settings_tag(config)}", ""))):
        fresh = load(str(tmp_path / "keep" / folder), tiny_llama())
        assert heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"] == first[key]["log_ppl"]

    results = tmp_path / "run" / "results.json"
    data = json.load(open(results))
    del data["entries"][kd_key]  # as if stopped before the distilled row was recorded
    results.write_text(json.dumps(data))
    third = Study(tiny_config(tmp_path / "run", **settings), tiny, texts=TEXTS).run()["entries"]
    assert third[kd_key]["log_ppl"] == first[kd_key]["log_ppl"]
