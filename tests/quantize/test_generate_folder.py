"""galinear generate loads the folders `galinear quantize --save` writes: a plain Hugging Face model
with the rotations fused, recognised by galinear_quantize.json (JSON, checked; pickles refused)."""
import copy
import json
import os

import pytest
import torch

from galinear.commands import generate
from galinear.lm import models
from galinear.quantize import fusion
from galinear.quantize.calibrate import quantize_weights
from galinear.quantize.pipeline import prepare
from galinear.quantize.study import save_model
from galinear.testing.folders import char_tokenizer, tiny_model_folder


def _gemma_folder(path):
    from galinear.testing.models import tiny_gemma

    tiny_gemma().save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    return str(path)


def _quantized(source, family, out, seed=0):
    """The study's steps on the model of ``source`` (R1 of ``family`` with its learned parameters moved,
    4-bit RTN weights), saved as `galinear quantize --save` saves it. Returns (folder, model)."""
    loaded = models.load_model(source)
    model = copy.deepcopy(loaded.model)
    rotation = prepare(model, family, seed)
    with torch.no_grad():
        for p in rotation.parameters():
            p.normal_(0.0, 0.3)
    fusion.apply_r1(model, rotation)
    quantize_weights(model, 4, "rtn")
    record = {"format": generate.QUANTIZE_FORMAT, "family": family, "seed": seed, "source": source, "simulated": True,
              "settings": {"wbits": 4, "abits": 16, "kvbits": 16, "method": "rtn", "gguf_file": None}}
    folder = os.path.join(out, "models", f"{family}-s{seed}")
    return save_model(model, loaded.tokenizer, folder, record), model


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("quantized")
    source = tiny_model_folder(root / "source")
    folder, model = _quantized(source, "rotor", str(root / "out"))
    return {"source": source, "folder": folder, "model": model, "root": root}


@pytest.mark.parametrize("architecture", ["llama", "gemma3"])
def test_the_loader_gives_the_quantized_model(tmp_path, architecture):
    source = tiny_model_folder(tmp_path / "source") if architecture == "llama" else _gemma_folder(tmp_path / "source")
    folder, model = _quantized(source, "butterfly", str(tmp_path / "out"))
    assert generate.quantize_folder(folder) == folder
    assert generate.quantize_folder(str(tmp_path / "out" / "models")) == folder  # the only one there
    record = generate.read_quantize_record(folder)
    assert record["family"] == "butterfly" and record["_folder"] == folder
    loaded = generate.load_quantized(record)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in loaded.modules())
    ids = torch.randint(0, 35, (1, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(ids).logits, loaded(ids).logits
    assert float((a - b).abs().max()) <= 2e-5 * float(a.abs().max())
    original = models.load_model(source)
    out = generate.compare_models(original.model, loaded, original.tokenizer, "abc def", tokens=8)
    assert out["compressed"] == generate.greedy(model, out["prompt_ids"], 8, original.tokenizer.eos_token_id)
    assert out["original"] == generate.greedy(original.model, out["prompt_ids"], 8, original.tokenizer.eos_token_id)


def test_the_command_prints_the_original_and_the_quantized_model(saved, capsys):
    from galinear.cli import main

    assert main(["generate", saved["folder"], "--prompt", "abc def", "--tokens", "6", "--width", "80"]) == 0
    text = capsys.readouterr().out
    assert "simulated quantization, rotor rotation, seed 0, W4A16KV16 RTN" in text
    assert f"quantized: {saved['folder']}" in text
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("original")][0]
    assert header.split("|")[1].strip() == "quantized"
    tokenizer = char_tokenizer()
    ids = generate.prompt_ids(tokenizer, "abc def")
    want = tokenizer.decode(generate.greedy(saved["model"], ids, 6, tokenizer.eos_token_id))
    assert lines[lines.index(header) + 2].split("|")[1].strip() == want.strip()


def test_damaged_or_pickled_folders_are_named(saved, tmp_path, capsys):
    import shutil

    from galinear.cli import main

    folder = str(tmp_path / "q")
    shutil.copytree(saved["folder"], folder)
    record = os.path.join(folder, generate.QUANTIZE_RECORD)
    good = open(record).read()
    for text, message in [("{not json", "galinear_quantize.json"),
                          (json.dumps({"format": "other"}), "\"format\" must be 'galinear-quantize-v1'"),
                          (good.replace('"rotor"', '"spiral"'), "\"family\" must be one of"),
                          (good.replace('"wbits": 4', '"wbits": "4"'), "settings\".wbits must be an integer")]:
        with open(record, "w") as handle:
            handle.write(text)
        assert main(["generate", folder, "--tokens", "2"]) == 2
        err = capsys.readouterr().err
        assert message in err and "galinear quantize --save" in err
    with open(record, "w") as handle:
        handle.write(good)
    os.replace(os.path.join(folder, "model.safetensors"), os.path.join(folder, "pytorch_model.bin"))
    assert main(["generate", folder, "--tokens", "2"]) == 2
    assert "never loads (unpickling can run code)" in capsys.readouterr().err


def test_a_folder_of_several_quantized_models_names_them(saved, capsys):
    from galinear.cli import main

    import shutil

    models_folder = os.path.dirname(saved["folder"])
    second = os.path.join(models_folder, "none-s0")
    shutil.copytree(saved["folder"], second)
    try:
        assert main(["generate", models_folder, "--tokens", "2"]) == 2
        err = capsys.readouterr().err
        assert "holds 2 quantized models; load one of them" in err and "none-s0" in err and "rotor-s0" in err
    finally:
        shutil.rmtree(second)
