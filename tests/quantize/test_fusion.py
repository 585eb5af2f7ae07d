"""Every fused rotation leaves the unquantized model's function unchanged: logits to float rounding,
greedy generation token for token; the saved folder loads with Hugging Face; other families refused."""
import copy

import pytest
import torch

from galinear.commands.generate import greedy
from galinear.quantize import fusion
from galinear.quantize.pipeline import prepare
from galinear.quantize.study import save_model
from galinear.quantize.rotations import FAMILIES
from galinear.testing.models import tiny_causal_lm, tiny_llama


def _scaled_norms(model):
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)  # fold non-trivial scales
    return model


def _rotated(model, family, seed=0):
    rotation = prepare(model, family, seed)
    with torch.no_grad():
        for p in rotation.parameters():
            p.normal_(0.0, 0.3)  # a learned rotation away from its start
    fusion.rotate_residual(model, rotation.matrix())
    return model


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f in ("hadamard", "cayley") else f
                                    for f in FAMILIES])
def test_every_fused_rotation_keeps_the_model(family):
    original = _scaled_norms(tiny_llama(2))
    model = _rotated(copy.deepcopy(original), family)
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = original(ids).logits, model(ids).logits
    assert torch.allclose(a, b, atol=2e-5 * float(a.abs().max()))
    prompt = [3, 14, 15, 9, 2, 6]
    assert greedy(model, prompt, 20) == greedy(original, prompt, 20)


def test_a_tied_head_is_untied_before_folding():
    original = _scaled_norms(tiny_llama(2))
    original.config.tie_word_embeddings = True
    original.tie_weights()
    assert original.lm_head.weight is original.model.embed_tokens.weight
    model = _rotated(copy.deepcopy(original), "hadamard")
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    ids = torch.randint(0, 64, (1, 16))
    with torch.no_grad():
        assert torch.allclose(original(ids).logits, model(ids).logits, atol=1e-4)


def test_the_saved_folder_loads_as_a_plain_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from galinear.quantize.calibrate import quantize_weights

    class Tokenizer:  # save_pretrained's only need
        def save_pretrained(self, folder):
            pass

    model = _rotated(_scaled_norms(tiny_llama(2)), "rotor")
    quantize_weights(model, 4, "rtn")
    folder = save_model(model, Tokenizer(), str(tmp_path / "q"), {"family": "rotor"})
    loaded = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True).eval()
    ids = torch.randint(0, 64, (1, 20))
    with torch.no_grad():
        a, b = model(ids).logits, loaded(ids).logits
    assert torch.allclose(a, b, atol=1e-4)  # the online Hadamard multiplied back into down_proj
    assert (tmp_path / "q" / "galinear_quantize.json").is_file()


@pytest.mark.parametrize("family", ["gpt2", "phi3"])
def test_an_unknown_architecture_is_refused_naming_the_fix(family):
    model = tiny_causal_lm(family)
    with pytest.raises(ValueError, match=r"unknown architecture .*llama, mistral, qwen2.*online in gemma3_text.*"
                                         r"--rotation none"):
        fusion.check_architecture(model)
    with pytest.raises(ValueError, match=r"unknown architecture"):
        fusion.r1_mode(model)


def test_gemma3_is_accepted_with_r1_online():
    model = tiny_causal_lm("gemma3")
    assert fusion.check_architecture(model) == "gemma3_text" and fusion.r1_mode(model) == "online"


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_apply_r1_is_rotate_residual_bit_for_bit_where_r1_is_fused(family):
    original = tiny_causal_lm(family)
    assert fusion.r1_mode(original) == "fused" and fusion.r1_projections(original) == fusion.READERS + fusion.WRITERS
    a, b = copy.deepcopy(original), copy.deepcopy(original)
    rotation = prepare(a, "butterfly", 0)
    prepare(b, "butterfly", 0)
    with torch.no_grad():
        for p in rotation.parameters():
            p.normal_(0.0, 0.3)
    fusion.apply_r1(a, rotation)
    fusion.rotate_residual(b, rotation.matrix().detach())
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
