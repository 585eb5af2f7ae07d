"""A kept folder's recorded source: its absolute path and its path from the folder are recorded,
a relative source is found from anywhere, a missing one is named with the ways to give the model,
and a source is read only from safetensors (or GGUF), after the folder's own checks."""
import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from galinear.compress import load
from galinear.compress.methods import catalogue as methods
from galinear.compress.storage import folder_format
from galinear.lm import models  # noqa: E402
from galinear.testing.compression import kept_folder  # noqa: E402
from galinear.testing.folders import tiny_model_folder  # noqa: E402
from galinear.testing.payloads import CodePayload  # noqa: E402


def _keep(root, source_arg: str, cwd=None):
    """Save a folder of two low-rank replacements of the model at ``root/models/A/tiny``, with the
    source written as ``source_arg`` (relative to ``cwd`` when given); returns the folder."""
    tiny_model_folder(root / "models" / "A" / "tiny")
    here = os.getcwd()
    os.chdir(cwd or here)
    try:
        return kept_folder(root / "keep" / "lr1", source_arg, methods.MethodSpec("lr1-cf"), ("q_proj", "v_proj"),
                           name="tiny")
    finally:
        os.chdir(here)


def _recorded(folder):
    return json.loads(open(os.path.join(folder, folder_format.CONFIG)).read())


def _logits(model):
    with torch.no_grad():
        return model(input_ids=torch.tensor([[1, 5, 9, 12, 3]])).logits


def test_relative_source_is_recorded_absolute_and_found_from_elsewhere(tmp_path, monkeypatch):
    folder = _keep(tmp_path, "models/A/tiny", cwd=tmp_path)
    saved = _recorded(folder)["model"]
    assert saved["source"] == "models/A/tiny" and "weights_sha256" in saved
    assert saved["source_path"] == os.path.realpath(tmp_path / "models" / "A" / "tiny")
    assert saved["source_from_folder"] == os.path.join("..", "..", "models", "A", "tiny")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    model = load(folder)
    assert type(models.projection(model, 0, "q_proj")).__name__ == "LowRankLinear"
    reference = load(folder, models.load_model(str(tmp_path / "models" / "A" / "tiny")).model)
    assert torch.equal(_logits(model), _logits(reference))


def test_a_tree_moved_whole_finds_its_source_from_the_folder(tmp_path, monkeypatch):
    _keep(tmp_path / "old", "models/A/tiny", cwd=tmp_path / "old")
    shutil.move(str(tmp_path / "old"), str(tmp_path / "new"))   # the recorded absolute path is gone
    monkeypatch.chdir(tmp_path)
    model = load(str(tmp_path / "new" / "keep" / "lr1"))
    assert type(models.projection(model, 0, "v_proj")).__name__ == "LowRankLinear"


def test_a_relative_source_of_an_older_folder_is_looked_up_from_the_folder(tmp_path, monkeypatch):
    folder = _keep(tmp_path, "models/A/tiny", cwd=tmp_path)
    config = _recorded(folder)
    del config["model"]["source_path"], config["model"]["source_from_folder"]
    config["model"]["source"] = "../../models/A/tiny"                     # relative to the folder
    with open(os.path.join(folder, folder_format.CONFIG), "w") as f:
        json.dump(config, f)
    monkeypatch.chdir(tmp_path / "models")
    assert type(models.projection(load(folder), 0, "q_proj")).__name__ == "LowRankLinear"


def test_a_missing_source_is_named_with_the_ways_to_give_the_model(tmp_path, monkeypatch):
    folder = _keep(tmp_path, "models/A/tiny", cwd=tmp_path)
    shutil.rmtree(tmp_path / "models")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as caught:
        load(folder)
    message = str(caught.value)
    assert "cannot be found" in message and os.path.realpath(tmp_path / "models" / "A" / "tiny") in message
    assert "--model PATH" in message and "galinear.compress.load(folder, model)" in message
    assert "forbids downloads" not in message                              # not read as a hub name


def test_a_hub_name_offline_names_the_ways_to_give_the_model(tmp_path, monkeypatch):
    folder = _keep(tmp_path, "models/A/tiny", cwd=tmp_path)
    config = _recorded(folder)
    config["model"].update(source="someone/tiny-llama", source_path=None, source_from_folder=None)
    with open(os.path.join(folder, folder_format.CONFIG), "w") as f:
        json.dump(config, f)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"HF_HUB_OFFLINE=1.*--model PATH.*load\(folder, model\)"):
        load(folder)


def _point_at_pickles(folder, tmp_path):
    """Rewrite the folder's source to a model folder holding only a pickled pytorch_model.bin."""
    evil = tmp_path / "evil"
    evil.mkdir()
    shutil.copy(tmp_path / "models" / "A" / "tiny" / "config.json", evil / "config.json")
    marker = tmp_path / "ran"
    torch.save({"payload": CodePayload(marker)}, evil / "pytorch_model.bin")
    config = _recorded(folder)
    config["model"].update(source=str(evil), source_path=str(evil), source_from_folder=None)
    with open(os.path.join(folder, folder_format.CONFIG), "w") as f:
        json.dump(config, f)
    return marker


def test_a_source_with_only_pickled_weights_is_refused_unread(tmp_path):
    folder = _keep(tmp_path, str(tmp_path / "models" / "A" / "tiny"))
    marker = _point_at_pickles(folder, tmp_path)
    with pytest.raises(ValueError, match=r"pytorch_model\.bin.*never loads.*safetensors"):
        load(folder)
    assert not marker.exists()
    with pytest.raises(ValueError, match="pickled"):       # the same rule for every galinear model load
        models.load_model(str(tmp_path / "evil"))
    assert not marker.exists()


def test_the_source_is_looked_for_only_after_the_folders_own_checks(tmp_path, monkeypatch):
    folder = _keep(tmp_path, str(tmp_path / "models" / "A" / "tiny"))
    tensors = os.path.join(folder, folder_format.TENSORS)
    with open(tensors, "r+b") as f:                       # one byte of a tensor changed
        f.seek(os.path.getsize(tensors) - 3)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x40]))
    looked = []
    monkeypatch.setattr(models, "load_model", lambda *a, **k: looked.append(a))
    with pytest.raises(ValueError, match="SHA-256|sha256|checksum"):
        load(folder)
    assert looked == []


def test_a_missing_gguf_file_is_named(tmp_path):
    folder = _keep(tmp_path, str(tmp_path / "models" / "A" / "tiny"))
    config = _recorded(folder)
    config["model"]["gguf_file"] = "model.Q4_1.gguf"
    with open(os.path.join(folder, folder_format.CONFIG), "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match=r"holds no GGUF file model\.Q4_1\.gguf.*--model PATH"):
        load(folder)


@pytest.mark.parametrize("field,value,pattern", [
    ("source_path", "relative/path", "absolute path"),
    ("source_path", 7, "must be a string"),
    ("gguf_file", "weights.bin", r"\.gguf"),
])
def test_damaged_source_fields_are_refused(tmp_path, field, value, pattern):
    folder = _keep(tmp_path, str(tmp_path / "models" / "A" / "tiny"))
    config = _recorded(folder)
    config["model"][field] = value
    with open(os.path.join(folder, folder_format.CONFIG), "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match=pattern):
        load(folder)


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_a_named_source_loads_by_its_name_offline(name, tmp_path, monkeypatch):
    """A folder made from a named model (galinear.lm.sources.NAMED_MODELS) loads its source by that
    name, with no path recorded and HF_HUB_OFFLINE=1: the name is not a hub name."""
    from galinear.compress.storage import install
    from galinear.lm import sources

    assert name in sources.NAMED_MODELS
    assert folder_format.source_location(name, str(tmp_path)) == {"source_path": None, "source_from_folder": None}
    config = {"_folder": str(tmp_path), "model": {"source": name, "gguf_file": None, "source_path": None}}
    assert install.source_places(config) == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = []
    monkeypatch.setattr(models, "load_model", lambda source, gguf=None: asked.append((source, gguf)) or "loaded")
    assert install.load_source(config) == "loaded" and asked == [(name, None)]
