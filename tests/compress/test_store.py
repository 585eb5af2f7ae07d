"""The Store of a study: one model format written (compressed-model folders), one cache format
(``.safetensors`` files, JSON beside them), damaged caches are misses, caches of other formats are
never read; and what a run keeps loads through every route (load, load_compressed, generate,
the Hugging Face auto class, the pareto tool)."""
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from galinear.compress import Study, load, load_compressed
from galinear.compress.fitting import projection
from galinear.compress.storage import folder_format
from galinear.lm import models  # noqa: E402
from galinear.lm.perplexity import heldout_log_perplexity  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.folders import tiny_model_folder  # noqa: E402
from galinear.testing.models import TEXTS  # noqa: E402

#: One Adam method and one fitted from second moments (captures, fits and moments all cached),
#: with the o_proj refit and the distillation stage (their checkpoints too).
SETTINGS = dict(datasets=("a",), layer_sets=((0, 1),), methods=("lr1", "lr1-cf"), epochs=1.0, refit_o_proj=True,
                o_epochs=1.0, distill=True, distill_max_steps=2, distill_eval_every=1, valid_windows=1)
#: The files of a compressed-model folder.
FOLDER_FILES = {folder_format.CONFIG, folder_format.TENSORS, folder_format.AUTO_CONFIG, "README.md"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished study of a tiny Llama read from a safetensors folder (so its source is recorded)."""
    root = tmp_path_factory.mktemp("store")
    source = tiny_model_folder(root / "base")
    config = tiny_config(root / "out", model=source, **SETTINGS)
    study = Study(config, texts=TEXTS)
    return study, study.run(), root


def _log_ppl(results):
    return {key: entry["log_ppl"] for key, entry in results["entries"].items()}


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file())


def test_a_run_writes_only_compressed_model_folders_and_safetensors_caches(run):
    study, results, root = run
    out = root / "out"
    names = json.loads((out / "models" / "index.json").read_text())["models"]
    tags = {e["tag"] for e in results["entries"].values() if e["method"] != "original"}
    assert len(tags) == 4 and sorted(names) == sorted(f"{t}-s0-L0+1" for t in tags)  # fitted and distilled rows
    for name in names:
        assert set(os.listdir(out / "models" / name)) == FOLDER_FILES
        assert json.loads((out / "models" / name / folder_format.CONFIG).read_text())["format"] == folder_format.FORMAT
    assert sorted(os.listdir(out / "models")) == sorted(names + ["index.json"])
    everything = _files(out)
    assert not [f for f in everything if f.endswith((".pt", ".npz", ".bin", ".pkl"))]
    cache = _files(Path(study.work))
    assert cache and all(f.endswith((".safetensors", ".json")) for f in cache), cache
    for part in ("captures", "fits", "moments", "distill"):  # every kind of cache and checkpoint is there
        assert any(f.startswith(part + os.sep) and f.endswith(".safetensors") for f in cache), part
    assert _files(out / "cache" / "wikitext2") == [] or all(f.endswith(".safetensors")
                                                            for f in _files(out / "cache" / "wikitext2"))


def test_what_a_run_keeps_loads_through_every_route(run, capsys):
    """galinear.compress.load (source recorded), load_compressed, generate and the auto class read a
    kept folder of a run and give the ln PPL the run recorded."""
    from galinear.commands import generate
    from galinear.compress import register
    from galinear.compress.storage import transformers_auto

    study, results, root = run
    name = "lr1-cf-s0-L0+1"
    folder = str(root / "out" / "models" / name)
    recorded = results["entries"][f"lr1-cf|s0|0+1|a"]["log_ppl"]
    loaded, tokenizer = load(folder, with_tokenizer=True)
    assert heldout_log_perplexity(loaded, study.windows["a"])["log_ppl"] == recorded
    other = models.load_model(str(root / "base")).model
    assert set(load_compressed(other, folder)) == {(layer, p) for layer in (0, 1)
                                                   for p in models.PROJECTIONS + ("o_proj",)}
    assert heldout_log_perplexity(other, study.windows["a"])["log_ppl"] == recorded
    register()
    try:
        from transformers import AutoModelForCausalLM

        via_auto = AutoModelForCausalLM.from_pretrained(folder)
    finally:
        transformers_auto.unregister()
    assert heldout_log_perplexity(via_auto, study.windows["a"])["log_ppl"] == recorded
    fresh = models.load_model(str(root / "base"))
    out = generate.compare(fresh.model, fresh.tokenizer, folder, "abc def", tokens=6)
    assert len(out["compressed"]) == 6
    from galinear.cli import main

    assert main(["generate", folder, "--prompt", "abc", "--tokens", "3"]) == 0
    assert "compressed: " + folder in capsys.readouterr().out


def test_the_pareto_tool_reads_a_run(run):
    """Its points are the run's rows: the original model and the four compressed ones, their ln PPL as recorded."""
    from galinear.compress.report import pareto

    study, results, root = run
    points = pareto.collect([str(root / "out")], dataset="a", layers_total=2)
    assert [p.method for p in points][0] == "original" and len(points) == 5
    recorded = {e["tag"]: e["log_ppl"] for e in results["entries"].values() if e["method"] != "original"}
    assert {p.tag: p.log_ppl for p in points[1:]} == recorded
    assert all(p.kept < 1 for p in points[1:]) and pareto.front(points)


def _payload_pickle(path, marker):
    """A pickle that creates ``marker`` when unpickled."""
    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"train": Payload()}))


def test_caches_of_other_formats_are_not_read(run, tmp_path, capsys):
    """Files at the names of the other cache formats (a .pt state or pickle, .npz moments) are never
    opened: the study logs them once and computes everything again, to the same numbers."""
    study, results, root = run
    config = tiny_config(tmp_path / "out", model=str(root / "base"), verbose=True, **SETTINGS)
    fresh = Study(config, texts=TEXTS)  # its cache folder, before anything is in it
    work = Path(fresh.work)
    spec = fresh.config.method_spec("lr1")
    old = {work / "captures" / "original-attn_in-L0.pt": "pickle",
           Path(fresh.store.unit_path(spec, 0, (), 0, "q_proj")).with_suffix(".pt"): "pickle",
           work / "moments" / "original-attn_in-L0-train.npz": "npz"}
    for path, kind in old.items():
        if kind == "pickle":
            _payload_pickle(path, tmp_path / "marker")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"PK\x03\x04 not read")
    before = {p: p.read_bytes() for p in old}
    capsys.readouterr()
    again = Study(config, texts=TEXTS)
    line = [x for x in capsys.readouterr().err.splitlines() if "cache file(s) of another format" in x]
    assert len(line) == 1 and "3 cache file(s)" in line[0] and str(work) in line[0]
    calls = []
    real = projection.fit_projection
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(projection, "fit_projection", lambda *a, **k: calls.append(1) or real(*a, **k))
        assert _log_ppl(again.run(report=False)) == _log_ppl(results)
    assert calls  # the old fit was not taken for one
    assert not (tmp_path / "marker").exists()
    assert {p: p.read_bytes() for p in old} == before  # left as they were, never replaced


def test_a_damaged_cache_file_is_a_miss_not_a_crash(run, tmp_path, capsys):
    """Truncated captures, fits, moments and distillation checkpoints, and a pickle in a
    .safetensors file, are removed and recomputed (never unpickled): the same numbers again."""
    study, results, root = run
    config = tiny_config(tmp_path / "out", model=str(root / "base"), cache_dir=str(tmp_path / "cache"), **SETTINGS)
    Study(config, texts=TEXTS).run(report=False)
    study = Study(config, texts=TEXTS)
    work = Path(study.work)
    fits = sorted((work / "fits").rglob("*.safetensors"))
    fit_file = Path(study.store.unit_path(study.config.method_spec("lr1"), 0, (), 0, "q_proj"))
    for path in fits:  # every unit is fitted again, so that the captures and moments are read
        if path != fit_file:
            path.unlink()
    damaged = [work / "captures" / "original-attn_in-L0.safetensors", fit_file,
               work / "moments" / "original-attn_in-L0-train.safetensors",
               next((work / "distill").rglob("*.safetensors"))]
    for path in damaged:
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 2])
    _payload_pickle(damaged[0], tmp_path / "marker")
    os.remove(tmp_path / "out" / "results.json")
    for name in os.listdir(tmp_path / "out" / "models"):  # the kept models, so that every row runs again
        if name != "index.json":
            shutil.rmtree(tmp_path / "out" / "models" / name)
    capsys.readouterr()
    again = Study(config, texts=TEXTS).run(report=False)
    err = capsys.readouterr().err
    assert _log_ppl(again) == _log_ppl(results)
    for path in damaged:
        assert f"{path}:" in err and path.exists(), path  # named, then written again whole
    assert "a pickle, not a safetensors state file; it is not read" in err
    assert not (tmp_path / "marker").exists()
