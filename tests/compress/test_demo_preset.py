"""The presets of `galinear compress` and `galinear demo`: the demo preset is the best known recipe at
matched budgets, the paper preset keeps the paper's one-layer protocol, and the demo's figure is
written from a tiny run."""
import argparse
import dataclasses
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.commands import compress, demo  # noqa: E402
from galinear.compress.study import config as study_config  # noqa: E402
from galinear.compress.study.config import PRESETS, StudyConfig, check, preset  # noqa: E402

# SmolLM2-135M: q 576 -> 576, k and v 576 -> 192 (3 of 9 heads of 64)
SMOLLM2_QKV = ((576, 576), (576, 192), (576, 192))


def _parsed(*argv):
    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    return parser.parse_args(list(argv))


def _params_per_layer(c: StudyConfig, method: str) -> int:
    from galinear.compress.methods.catalogue import build_module, count_parameters

    spec = c.method_spec(method)
    return sum(count_parameters(build_module(spec, d_in, d_out)) for d_in, d_out in SMOLLM2_QKV)


def test_every_preset_is_a_study_config_that_passes_the_checks(tmp_path):
    for name in PRESETS:
        c = preset(name)
        assert isinstance(c, StudyConfig)
        c = dataclasses.replace(c, out_dir=str(tmp_path / name), wikitext="off")
        check(c, loaded=object(), texts={d: "" for d in c.datasets})
    assert preset("demo") is not PRESETS["demo"] and preset("demo") == PRESETS["demo"]  # a copy
    with pytest.raises(ValueError, match="no preset 'nope'; the presets are converged, demo, full, paper, standard"):
        preset("nope")


def test_the_demo_preset_is_the_recipe_of_docs_results():
    c = preset("demo")
    (layers,) = c.layer_sets
    assert len(layers) >= 2 and list(layers) == list(range(layers[0], layers[-1] + 1))  # consecutive, in order
    assert c.objective == "attention" and c.distill and c.until_converged
    assert c.wikitext == "file" and c.wikitext_windows is not None and c.wikitext_windows >= 2  # a stated subset
    assert c.datasets == ("wikipedia",) and c.eval_windows >= 4  # and held-out Wikipedia windows
    assert set(c.methods) == {"rotor", "kron", "lr-cf"}
    assert (c.hidden, c.rank, c.terms) == (512, 1, 1)
    sizes = {m: _params_per_layer(c, m) for m in c.methods}
    dense = sum(d_in * d_out for d_in, d_out in SMOLLM2_QKV)
    assert max(sizes.values()) <= 1.1 * min(sizes.values()), sizes  # matched budgets, within 10 %
    assert all(0.004 < n / dense < 0.006 for n in sizes.values()), sizes  # about 0.5 % of the dense q/k/v
    assert compress.config_from_args(_parsed("--preset", "demo")) == c
    assert compress.unused_option_problem(_parsed("--preset", "demo", "--distill-steps", "5")) is None


def test_the_paper_preset_is_the_one_layer_protocol():
    """The settings `galinear demo` ran as its default before the demo preset was the recipe above."""
    old = dict(datasets=("wikipedia",), layer_sets=((15,),), methods=("rotor", "lr1", "lr1-cf", "lr4", "lr4-cf",
                                                                      "bh1", "bh1-cf"),
               seeds=(0,), multi_seeds=None, train_windows=16, eval_windows=8, mse_windows=2, epochs=1.0,
               until_converged=True, max_steps=256, eval_every=16, patience=4, wikitext="off")
    c = preset("paper")
    assert {k: getattr(c, k) for k in old} == old
    base = StudyConfig()  # every other field is the dataclass's
    assert {f.name for f in dataclasses.fields(c) if getattr(c, f.name) != getattr(base, f.name)} <= set(old) | {"out_dir"}
    assert compress.config_from_args(_parsed("--preset", "paper")) == c
    # the command line's default is a named preset: the same protocol, also scored on WikiText-2
    default = compress.config_from_args(_parsed())
    assert default == preset(study_config.DEFAULT_PRESET)
    assert dataclasses.replace(default, wikitext="off", out_dir=c.out_dir) == c


def test_explicit_options_replace_the_preset_fields():
    c = compress.config_from_args(_parsed("--preset", "demo", "--layers", "3-5", "--max-steps", "7", "--train-windows",
                                          "2", "--wikitext-windows", "1", "--distill-steps", "3", "--methods", "rotor"))
    assert c.layer_sets == ((3, 4, 5),) and (c.max_steps, c.train_windows, c.wikitext_windows) == (7, 2, 1)
    assert c.distill_max_steps == 3 and c.methods == ("rotor",) and c.objective == "attention" and c.distill
    paper = compress.config_from_args(_parsed("--preset", "paper", "--baseline-fit", "adam"))
    assert paper.methods == ("rotor", "lr1", "lr4", "bh1")
    assert compress.config_from_args(_parsed("--preset", "paper", "--baseline-fit", "closed-form")).methods == (
        "rotor", "lr1-cf", "lr4-cf", "bh1-cf")


def test_the_demo_says_what_it_runs_and_how_to_reach_the_paper_protocol():
    text = demo.describe(preset("demo"))
    assert "layers 12,13" in text and "--objective attention" in text and "distilled jointly" in text
    assert "3 windows of 2048 tokens of the WikiText-2 test split" in text
    assert "not available" not in text


def test_the_distillation_figure_of_a_tiny_run(tmp_path, tiny):
    pytest.importorskip("matplotlib")
    from galinear.compress import Study
    from galinear.compress.report.plot import distillation_pairs, write_distillation_figure
    from galinear.testing.models import random_text

    config = StudyConfig(datasets=("a",), layer_sets=((0, 1),), methods=("kron", "lr-cf"), rank=1, terms=1,
                         objective="attention", window=32, stride=16, train_windows=3, eval_windows=2, mse_windows=1,
                         epochs=1.0, distill=True, distill_max_steps=6, distill_eval_every=3, distill_lr=0.01, valid_windows=1,
                         out_dir=str(tmp_path / "run"), verbose=False, progress=False, save_models=False)
    study = Study(config, tiny, texts={"a": random_text(3000, 1)})
    entries = study.run()["entries"]
    study.write_report(plot=False)
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    pairs = distillation_pairs(summary, "a")
    assert pairs["original"] == entries["original|a"]["log_ppl"]
    assert [k for k, _, _ in pairs["methods"]] == [((0, 1), "kron"), ((0, 1), "lr-cf")]
    for (layers, method), before, after in pairs["methods"]:
        fitted = [e for e in entries.values() if e["method"] == method and "distill" not in e]
        distilled = [e for e in entries.values() if e["method"] == method and "distill" in e]
        assert before == fitted[0]["log_ppl"] and after == distilled[0]["log_ppl"] and before != after
    path = write_distillation_figure(str(tmp_path / "run"), "a")
    assert path == str(tmp_path / "run" / "distillation.png")
    with open(path, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    image = imread(path)
    assert image.shape[0] > 200 and image.shape[1] > 200 and image[..., :3].std() > 0.05  # not blank
