"""A kept folder through the Hugging Face Auto classes: galinear.compress.register() makes
AutoModelForCausalLM.from_pretrained(folder) load it as galinear.compress.load does; without it,
from_pretrained refuses the folder."""
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from galinear.compress import load, register
from galinear.compress.storage import transformers_auto
from galinear.compress.methods import catalogue as methods
from galinear.compress.storage import folder_format
from galinear.lm import models  # noqa: E402
from galinear.testing.compression import kept_folder  # noqa: E402
from galinear.testing.folders import tiny_model_folder  # noqa: E402


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A folder whose layer 0 and 1 q/k/v are the paper's rotor networks, kept from a tiny Llama
    saved as safetensors with a character tokenizer."""
    root = tmp_path_factory.mktemp("auto")
    base = tiny_model_folder(root / "base")
    spec = methods.MethodSpec("rotor", hidden=16)
    return kept_folder(root / "keep" / "rotor", base, spec, layers=(0, 1), name="tiny"), base


@pytest.fixture
def registered():
    register()
    register()                                  # a second call changes nothing
    yield
    transformers_auto.unregister()


def _greedy(model, tokenizer, prompt="the quick brown fox", tokens=12):
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    return out[0, ids.shape[1]:].tolist()


def test_plain_from_pretrained_refuses_the_folder(kept):
    folder, _ = kept
    transformers_auto.unregister()
    with pytest.raises(ValueError, match="galinear_compressed"):
        transformers.AutoModelForCausalLM.from_pretrained(folder)
    with pytest.raises((OSError, ValueError)):   # a concrete class finds no weights to build from
        transformers.LlamaForCausalLM.from_pretrained(folder)


def test_registered_auto_class_generates_what_load_generates(kept, registered):
    folder, base = kept
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    via_auto = transformers.AutoModelForCausalLM.from_pretrained(folder)
    via_galinear, galinear_tokenizer = load(folder, with_tokenizer=True)
    assert type(via_auto) is type(via_galinear) is transformers.LlamaForCausalLM
    assert {type(models.projection(via_auto, layer, p)).__name__ for layer in (0, 1) for p in models.PROJECTIONS} \
        == {"RotorNetwork"}
    assert not via_auto.training
    tokens = _greedy(via_auto, tokenizer)
    assert len(tokens) == 12 and tokens == _greedy(via_galinear, galinear_tokenizer)
    ids = tokenizer("a b c", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(via_auto(ids).logits, via_galinear(ids).logits)


def test_registered_auto_class_keeps_the_folders_checks(kept, registered, tmp_path):
    import shutil

    folder, _ = kept
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    tensors = copy / folder_format.TENSORS
    tensors.write_bytes(tensors.read_bytes()[:40])
    with pytest.raises(ValueError, match="replacements.safetensors"):
        transformers.AutoModelForCausalLM.from_pretrained(str(copy))


@pytest.mark.parametrize("options,pattern", [
    ({"dtype": torch.bfloat16}, "loads in float32"),
    ({"device_map": "auto"}, "spread the model"),
    ({"low_cpu_mem_usage": True}, "low_cpu_mem_usage do not apply"),
])
def test_options_that_cannot_apply_are_refused(kept, registered, options, pattern):
    folder, _ = kept
    with pytest.raises((ValueError, OSError), match=pattern):
        transformers.AutoModelForCausalLM.from_pretrained(folder, **options)


def test_float32_dtype_is_accepted(kept, registered):
    folder, _ = kept
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert next(model.parameters()).dtype == torch.float32


def test_the_folders_config_json_says_how_to_load_it(kept):
    import json

    folder, _ = kept
    data = json.loads(open(os.path.join(folder, "config.json")).read())
    assert data["model_type"] == "galinear_compressed" and "register()" in data["galinear_note"]
