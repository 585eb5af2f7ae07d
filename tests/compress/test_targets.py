"""--targets: o_proj and the MLP's gate/up/down replaced with every method on tiny random models of
each family (Llama, Qwen2, Mistral, Gemma-3), each fitted by the objective of its place, with its
budget counted over the replaced modules and the whole model; fused layouts refused."""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study, load, load_compressed
from galinear.compress.methods import budgets, catalogue as methods, records, targets
from galinear.lm import models  # noqa: E402
from galinear.lm.perplexity import heldout_log_perplexity  # noqa: E402
from galinear.compress.methods.names import METHODS, base_name  # noqa: E402
from galinear.lm.models import ALL_PROJECTIONS, LoadedModel  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, tiny_causal_lm  # noqa: E402

MLP_AND_O = ("o_proj", "gate_proj", "up_proj", "down_proj")


def _study(tmp_path, family, **overrides):
    settings = dict(layer_sets=((1,),), datasets=("a",), train_windows=2, eval_windows=2, epochs=1.0,
                    targets=ALL_PROJECTIONS, save_models=False, hidden=16)
    settings.update(overrides)
    model = tiny_causal_lm(family)
    return Study(tiny_config(tmp_path / "out", **settings), LoadedModel(model, CharTokenizer(), f"tiny-{family}"),
                 texts=TEXTS), model


def test_parse_targets():
    assert targets.parse_targets("q,k,v") == models.PROJECTIONS
    assert targets.parse_targets("down,o,gate_proj") == ("o_proj", "gate_proj", "down_proj")  # forward order
    assert targets.parse_targets("all") == ALL_PROJECTIONS
    for bad, why in (("q,x", "'x' is not a projection"), ("q,q", "given twice"), ("", "no projection")):
        with pytest.raises(ValueError, match=why):
            targets.parse_targets(bad)
    assert targets.stages(ALL_PROJECTIONS, "attention") == [(models.ATTENTION_PROJECTIONS, "attention"),
                                                            (models.MLP_PROJECTIONS, "mlp")]
    assert [g for g, _ in targets.stages(ALL_PROJECTIONS, "qkv")] == [
        models.PROJECTIONS, ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",)]
    assert targets.stages(MLP_AND_O, "logits") == [(MLP_AND_O, "logits")]


def _whole_model_share(model, replacements):
    total = sum(p.numel() for p in model.parameters())
    dense = sum(models.projection(model, layer, proj).weight.numel()
                + (0 if models.projection(model, layer, proj).bias is None else
                   models.projection(model, layer, proj).bias.numel()) for layer, proj in replacements)
    kept = sum(sum(p.numel() for p in m.parameters()) for m in replacements.values())
    return total, dense, kept, (total - dense + kept) / total


@pytest.mark.parametrize("family, objective", [("llama", "attention"), ("qwen2", "qkv"), ("mistral", "logits")])
def test_o_and_mlp_replaced_in_each_family(tmp_path, family, objective):
    """Every projection of layer 1 replaced by LR1 (Adam, by the objective of its place; until the
    validation loss stops improving for Qwen2) and LR1* (closed form on each projection's own
    input); the study counts the replaced parameters and the share of the whole model kept, the
    fitted modules change the model's output, and kept folders load back."""
    converged = dict(until_converged=True, max_steps=4, eval_every=2, patience=1, valid_windows=1)
    study, model = _study(tmp_path, family, methods=("lr1", "lr1-cf"), objective=objective, save_models=True,
                          save_dir=str(tmp_path / "keep"), **(converged if family == "qwen2" else {}))
    results = study.run(report=False)["entries"]
    spec = study.config.method_spec("lr1")
    fitted = study.fit_layer_set(spec, 0, (1,))  # read back from the checkpoints
    reps = fitted.replacements
    assert set(reps) == {(1, p) for p in ALL_PROJECTIONS}
    bias = family == "qwen2"  # Qwen2's q/k/v carry a bias, and so do their replacements
    for (layer, proj), module in reps.items():
        orig = models.projection(model, layer, proj)
        assert isinstance(module, torch.nn.Module) and type(module).__name__ == "LowRankLinear"
        assert (module.in_features, module.out_features) == (orig.in_features, orig.out_features)
        assert (getattr(module, "bias", None) is not None) == (orig.bias is not None)
        assert orig.bias is None or bias
    total, dense, kept, share = _whole_model_share(model, reps)
    for tag in (spec.tag(), "lr1-cf"):
        entry = results[f"{tag}|s0|1|a"]
        assert entry["targets"] == list(ALL_PROJECTIONS)
        assert set(entry["test_mse"]) == set(ALL_PROJECTIONS)
        assert entry["params_per_layer"] == kept and entry["replaced_params"] == kept
        assert entry["dense_params_per_layer"] == dense and entry["replaced_dense_params"] == dense
        assert entry["model_params"] == total and entry["model_params_kept"] == total - dense + kept
        assert entry["model_share"] == pytest.approx(share)
        assert abs(entry["log_ppl"] - results["original|a"]["log_ppl"]) > 1e-6  # the replacements are in use
    # kept folders load back into a fresh model and score the same; with --save none is written under models/
    for tag in (spec.tag(), "lr1-cf"):
        fresh = load(str(tmp_path / "keep" / f"{tag}-s0-L1"), tiny_causal_lm(family))
        assert heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"] == results[f"{tag}|s0|1|a"]["log_ppl"]
        other = tiny_causal_lm(family)
        assert set(load_compressed(other, str(tmp_path / "keep" / f"{tag}-s0-L1"))) == set(reps)
        assert heldout_log_perplexity(other, study.windows["a"])["log_ppl"] == results[f"{tag}|s0|1|a"]["log_ppl"]
    if objective == "attention":
        assert "q/k/v/o jointly (attention objective), gate/up/down jointly (MLP output)" in results[
            f"{spec.tag()}|s0|1|a"]["fit"]
        for proj in ALL_PROJECTIONS:
            assert fitted.stats[(1, proj)].extra["objective"] == ("mlp" if proj in models.MLP_PROJECTIONS else "attention")


def test_budget_counts_the_replaced_modules(tmp_path):
    """--budget is a share of each replaced projection (o, gate, up, down here, rectangular ones
    included); the report states the whole model's share kept; the distillation fits them all."""
    study, model = _study(tmp_path, "llama", methods=("kron", "lr-cf"), budget=0.25, targets=MLP_AND_O,
                          distill=True, distill_max_steps=2, distill_eval_every=1, valid_windows=1)
    results = study.run()["entries"]
    for name in ("kron", "lr-cf"):
        spec = study.config.method_spec(name)
        reps = study.fit_layer_set(spec, 0, (1,)).replacements
        assert set(reps) == {(1, p) for p in MLP_AND_O}
        for (layer, proj), module in reps.items():
            orig = models.projection(model, layer, proj)
            want = budgets.closest_setting(base_name(name), round(0.25 * orig.weight.numel()), orig.in_features,
                                           orig.out_features, False).parameters
            assert methods.count_parameters(module) == want
        total, dense, kept, share = _whole_model_share(model, reps)
        rows = [e for k, e in results.items() if k.startswith(spec.tag() + "|") or k.startswith(spec.tag() + "-kd")]
        assert len(rows) == 2  # fitted, then distilled
        for entry in rows:
            assert entry["replaced_params"] == kept and entry["replaced_dense_params"] == dense
            assert entry["model_share"] == pytest.approx(share)
            assert 0.2 * dense < kept < 0.3 * dense
    table = (tmp_path / "out" / "results.md").read_text()
    assert "params/layer (o+gate+up+down)" in table and "% of model kept" in table
    assert f"{100 * share:.2f}" in table


@pytest.mark.parametrize("shape", [(32, 64), (64, 32), (32, 16), (40, 96)], ids=str)
def test_every_method_builds_and_fits_rectangular_maps(shape):
    """gate/up (d -> 4d-ish), down (the reverse), k/v under grouped-query attention: every method
    builds a module of that shape, and the closed-form ones fit it from second moments."""
    from galinear.compress.fitting import closed_form

    d_in, d_out = shape
    x, w = torch.randn(200, d_in), torch.randn(d_out, d_in)
    reg = closed_form.SecondMoments(d_in).update(x).regression(w)
    for name in METHODS:
        spec = methods.MethodSpec(name=name, hidden=16 if records.method(name).width else None)
        module = methods.build_module(spec, d_in, d_out)
        assert module(x[:3]).shape == (3, d_out), name
        if spec.closed_form:
            stats = closed_form.fit_module(module, reg)
            assert stats["train_mse"] <= reg.target_mean_square() * 1.0001, name


@pytest.mark.parametrize("family, found", [("gpt2", "c_attn (Conv1D)"), ("phi3", "qkv_proj (Linear)")])
def test_fused_layouts_refused_naming_the_module(tmp_path, family, found):
    model = tiny_causal_lm(family)
    with pytest.raises(ValueError, match=r"has no nn.Linear q_proj") as error:
        Study(tiny_config(tmp_path / "out", layer_sets=((1,),), targets=ALL_PROJECTIONS),
              LoadedModel(model, CharTokenizer(), family), texts=TEXTS)
    assert found in str(error.value) and "\n" not in str(error.value)


def test_gemma3(tmp_path):
    """Gemma-3 (q/k norms, norms around the MLP, sliding-window layers): o and the MLP replaced,
    fitted to the attention block's and the MLP block's outputs."""
    study, model = _study(tmp_path, "gemma3", methods=("lr1",), objective="attention", targets=MLP_AND_O)
    results = study.run(report=False)["entries"]
    entry = results[f"{study.config.method_spec('lr1').tag()}|s0|1|a"]
    assert set(entry["test_mse"]) == set(MLP_AND_O)
    assert entry["fit"].endswith("o jointly (attention objective), gate/up/down jointly (MLP output)")
    assert 0 < entry["model_share"] < 1


def test_refit_o_proj_and_o_target_refused(tmp_path):
    with pytest.raises(ValueError, match="--refit-o-proj .* drop one"):
        _study(tmp_path, "llama", methods=("lr1",), refit_o_proj=True)


def test_help_names_targets():
    out = subprocess.run([sys.executable, "-m", "galinear", "compress", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--targets" in out and "q,k,v,o,gate,up,down" in out
