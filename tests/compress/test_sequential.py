"""Whole-model compression: `--layers all` and ranges, layers fitted in order on the partly compressed
network, per-layer progress, and a run interrupted after a layer that resumes bit for bit."""
import glob
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study
from galinear.compress.fitting import projection
from galinear.compress.storage import checkpoints
from galinear.compress.storage import folder_format
from galinear.compress.study import sequential
from galinear.lm.models import LoadedModel  # noqa: E402
from galinear.compress.storage.store import set_name  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, tiny_llama  # noqa: E402


def test_layer_syntax():
    parse = sequential.parse_layer_sets
    assert parse("4;15;15,16") == ((4,), (15,), (15, 16))  # the existing syntax is unchanged
    assert parse("0-3") == ((0, 1, 2, 3),) and parse("0-2,5;7") == ((0, 1, 2, 5), (7,))
    assert parse("all") == (("all",),) and parse("15; ALL") == ((15,), ("all",))
    assert sequential.expand_layer_sets(parse("15;all"), 4) == ((15,), (0, 1, 2, 3))
    for bad, message in (("3-1", "runs backwards"), ("x", "not a layer index"), ("all,3", "set of its own"),
                         (" ; ", "no layer set")):
        with pytest.raises(ValueError, match=message):
            parse(bad)


def test_command_line_reads_all_and_ranges():
    import argparse

    from galinear.commands import compress

    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    config = compress.config_from_args(parser.parse_args(["--layers", "0-29", "--methods", "lr1"]))
    assert config.layer_sets == (tuple(range(30)),) and config.wikitext == "auto"
    config = compress.config_from_args(parser.parse_args(["--layers", "all", "--distill", "--preset", "paper"]))
    assert config.layer_sets == (("all",),) and config.distill and config.wikitext == "off"


def test_layer_progress_estimates_the_time_left():
    lines = []
    progress = sequential.LayerProgress("lr1", (0, 1, 2, 3), lines.append)
    progress.done(0, loaded=True)
    assert "layer 0 (1/4) loaded from its checkpoints; 3 layers left, about ?" in lines[-1]
    progress.fitted_seconds, progress.fitted = 10.0, 1  # one layer fitted in 10 s
    progress.done(1, loaded=True)
    assert "2 layers left, about 20 s" in lines[-1]
    progress.done(3, loaded=True)
    assert "0 layers left, about 0 s" in lines[-1]


def _unit_tensors(folder):
    """Every fitted tensor under a study's cache, by file path relative to the fits folder, and the models."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "cache", "*", "fits", "**", "*.safetensors"), recursive=True)):
        state = checkpoints.load(path, recompute=False)["state"]
        rel = path.split(os.sep + "fits" + os.sep)[1]
        out.update({f"{rel}:{k}": v for k, v in state.items()})
    return out


def test_all_layers_resume_bit_for_bit_after_an_interruption(tmp_path, monkeypatch):
    """`--layers all` on a 4-layer model: a run stopped after layer 1 of the second method and rerun ends
    with the same replacement tensors, bit for bit, as a run never interrupted; finished layers are not
    refitted."""
    loaded = LoadedModel(tiny_llama(layers=4, seed=2), CharTokenizer(), "tiny-llama-4")
    settings = dict(datasets=("a",), layer_sets=(("all",),), methods=("rotor", "lr1"), hidden=16, epochs=1.0)
    lines = []
    reference_study = Study(tiny_config(tmp_path / "ref", **settings), loaded, texts=TEXTS)
    assert reference_study.config.layer_sets == ((0, 1, 2, 3),)
    reference_study.log.echo = lines.append  # the per-layer lines with their estimate
    reference = reference_study.run()
    assert any("layer 2 (3/4) fitted in" in line and "1 layer left, about" in line for line in lines)
    real_fit = projection.fit_projection
    calls = {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4 * 3 + 2 * 3 + 1:  # rotor: 4 layers; lr1: layers 0 and 1; then stop in layer 2
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(projection, "fit_projection", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Study(tiny_config(tmp_path / "resumed", **settings), loaded, texts=TEXTS).run()
    counted = {"n": 0}

    def counting(*args, **kwargs):
        counted["n"] += 1
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(projection, "fit_projection", counting)
    resumed = Study(tiny_config(tmp_path / "resumed", **settings), loaded, texts=TEXTS).run()
    assert counted["n"] == 2 * 3  # only lr1's layers 2 and 3
    ref_units, new_units = _unit_tensors(tmp_path / "ref"), _unit_tensors(tmp_path / "resumed")
    assert len(ref_units) > 0 and ref_units.keys() == new_units.keys()
    for key, value in ref_units.items():
        assert torch.equal(value, new_units[key]), key
    assert any("P0+1+2" in key for key in ref_units)  # layer 3 was fitted behind the three replaced below it
    for name in ("rotor-h16-e1-lr0.05", "lr1-e1-lr0.05"):  # the kept whole models, bit for bit
        ref, new = (folder_format.checked_replacements(
                        folder_format.read_config(str(tmp_path / run / "models" / f"{name}-s0-L0+1+2+3")))
                    for run in ("ref", "resumed"))
        assert len(ref) == 4 * 3 and ref.keys() == new.keys()
        for key, module in ref.items():
            for k, v in module.state_dict().items():
                assert torch.equal(v, new[key].state_dict()[k]), (name, key, k)
    for key, entry in reference["entries"].items():
        assert resumed["entries"][key]["log_ppl"] == entry["log_ppl"], key


def test_each_layer_sees_the_network_replaced_below_it(tmp_path):
    """The capture behind layer 2 of a sequential run is the attention input of the model whose layers
    0 and 1 carry this method's fitted replacements (recomputed here independently)."""
    from galinear.compress.fitting import activations, surgery

    loaded = LoadedModel(tiny_llama(layers=3, seed=4), CharTokenizer(), "tiny-llama-3")
    config = tiny_config(tmp_path / "run", datasets=("a",), layer_sets=(("all",),), methods=("lr1",), epochs=1.0)
    study = Study(config, loaded, texts=TEXTS)
    study.run()
    spec = config.method_spec("lr1")
    fitted = study.fit_layer_set(spec, 0, (0, 1, 2)).replacements  # loaded from the checkpoints
    below = {k: m for k, m in fitted.items() if k[0] < 2}
    with surgery.swapped(loaded.model, below):
        expected = activations.capture(loaded.model, 2, study.captures.train_ids())
    key = study.store.input_key(spec, 0, (0, 1), 2)
    train, _ = study.captures.pair(2, "attn_in", below, key)
    assert torch.equal(train, expected) and set_name((0, 1)) in key
    original = activations.capture(loaded.model, 2, study.captures.train_ids())
    assert not torch.allclose(original, expected)  # the replaced layers below did change the inputs
    assert not np.isnan(float(train.sum()))


def test_logits_objective_runs_from_layer_0(tmp_path):
    """`--layers all --objective logits`: the first layer's objective starts from the embeddings, which
    reproduce the full forward's logits; a sequential run over every layer completes."""
    from galinear.compress.fitting import activations, objective

    loaded = LoadedModel(tiny_llama(layers=2, seed=6), CharTokenizer(), "tiny-llama-2")
    ids = np.asarray(CharTokenizer()(TEXTS["b"])["input_ids"][:64], dtype=np.int64).reshape(2, 32)
    residual = activations.residual_inputs(loaded.model, 0, ids)
    with torch.no_grad():
        full = loaded.model(input_ids=torch.as_tensor(ids)).logits
        part = objective.next_token_logits(loaded.model, 0, residual)
    assert torch.allclose(full, part, atol=1e-6, rtol=1e-6)
    config = tiny_config(tmp_path / "run", datasets=("a",), layer_sets=(("all",),), methods=("lr1",), epochs=1.0,
                         objective="logits")
    entries = Study(config, loaded, texts=TEXTS).run()["entries"]
    assert entries["lr1-e1-lr0.05-objlogits|s0|0+1|a"]["fit"].endswith("(logits objective)")


def test_help_names_the_whole_model_options(capsys):
    from galinear.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["compress", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--layers all" in text and "'0-29' or 'all' (every decoder layer)" in text
    assert "--distill" in text and "distilling the original model's next-token distribution (KL)" in text
    assert "--wikitext {auto,file,hub,off}" in text and "whole WikiText-2 test split" in text
    assert "the default when its file is installed" in text


def test_compact_layer_names():
    assert sequential.compact(range(30)) == "0-29" and sequential.compact((0, 2)) == "0,2"
    assert sequential.compact((0, 1, 2, 5, 7, 8)) == "0-2,5,7,8" and sequential.compact((16,)) == "16"


def test_the_captures_cache_releases_a_layer(tmp_path, monkeypatch):
    """The captures cache holds a layer's original captures in memory until it releases that layer;
    after the release they are read back from the disk cache, equal."""
    loaded = LoadedModel(tiny_llama(layers=3, seed=1), CharTokenizer(), "tiny-llama")
    study = Study(tiny_config(tmp_path, datasets=("a",), layer_sets=((1,),), methods=("lr1",)), loaded, texts=TEXTS)
    captures = study.captures
    train, test = captures.original(1)
    reads = []
    real = checkpoints.load
    monkeypatch.setattr(checkpoints, "load", lambda path, **kw: reads.append(path) or real(path, **kw))
    assert captures.original(1)[0] is train and not reads  # held in memory
    captures.release(0)  # another layer: nothing of layer 1 is dropped
    assert captures.original(1)[0] is train and not reads
    captures.release(1)
    again, again_test = captures.original(1)
    assert reads == [study.store.capture_path("original-attn_in-L1")]
    assert again is not train and torch.equal(again, train) and torch.equal(again_test, test)
