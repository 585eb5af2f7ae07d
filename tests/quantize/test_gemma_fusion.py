"""Gemma-3 with R1 applied online: every rotation family leaves the unquantized model's function
unchanged (logits to float rounding, greedy tokens), the post norms, the embeddings and the tied head
stay as they are, and the saved folder is a plain Gemma-3 model computing the same function."""
import copy
from types import SimpleNamespace

import pytest
import torch

from galinear.commands.generate import greedy
from galinear.quantize import fusion
from galinear.quantize.pipeline import prepare
from galinear.quantize.study import save_model
from galinear.quantize.rotations import FAMILIES, Rotation
from galinear.testing.models import tiny_gemma, tiny_llama


def _rotated(model, family, seed=0, dtype=torch.float32):
    rotation = prepare(model, family, seed, dtype=dtype)
    with torch.no_grad():
        for p in rotation.parameters():
            p.normal_(0.0, 0.3)  # a learned rotation away from its start
    fusion.apply_r1(model, rotation)
    return model, rotation


IDS = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(0))


def _logits(model, ids=IDS):
    with torch.no_grad():
        return model(ids).logits.double()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_online_rotation_keeps_the_model_in_float64(family):
    # R2 and R4 are fused in float64 and the online R1 rotates the norms' scaled outputs: every family
    # agrees with the original to float64 rounding.
    original = tiny_gemma(torch.float64)
    model, _ = _rotated(copy.deepcopy(original), family, dtype=torch.float64)
    a, b = _logits(original), _logits(model)
    assert float((b - a).abs().max()) <= 1e-12 * float(a.abs().max())
    prompt = [3, 14, 15, 9, 2, 6]
    assert greedy(model, prompt, 20) == greedy(original, prompt, 20)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_online_rotation_keeps_the_model_in_float32(family):
    original = tiny_gemma()
    model, rotation = _rotated(copy.deepcopy(original), family)
    a, b = _logits(original), _logits(model)
    assert float((b - a).abs().max()) <= 2e-5 * float(a.abs().max())
    prompt = [3, 14, 15, 9, 2, 6]
    assert greedy(model, prompt, 20) == greedy(original, prompt, 20)
    route = {"none": None, "hadamard": "hadamard", "cayley": "dense", "butterfly": "hadamard+blocks",
             "rotor": "hadamard+blocks"}[family]
    online = fusion.online_rotation(rotation)
    assert (online and online.kind) == route
    for block, theirs in zip(model.model.layers, original.model.layers):
        for name in ("input_layernorm", "pre_feedforward_layernorm"):
            norm = getattr(block, name)
            # the scales stay in the norms (the readers' grids never see them)
            assert torch.equal(norm.weight, getattr(theirs, name).weight)
            assert (getattr(norm, fusion._ONLINE_R1, None) is not None) == (family != "none")


def test_folding_the_read_norms_is_still_an_option_and_keeps_the_function():
    # Gemma3RMSNorm normalises in float32 whatever the model's dtype, so folding (1 + w) from the
    # norm's float32 output into float64 weights bounds the agreement by float32 rounding.
    original = tiny_gemma(torch.float64)
    folded = copy.deepcopy(original)
    fusion.fold_norms(folded, online="fold")
    for block in folded.model.layers:
        for name in ("input_layernorm", "pre_feedforward_layernorm"):
            assert torch.equal(getattr(block, name).weight, torch.zeros_like(getattr(block, name).weight))
    a, f = _logits(original), _logits(folded)
    assert float((f - a).abs().max()) <= 1e-6 * float(a.abs().max())
    with pytest.raises(ValueError, match="online must be 'keep' or 'fold'"):
        fusion.fold_norms(folded, online="yes")


def test_post_norms_embeddings_and_the_tied_head_are_left_alone():
    original = tiny_gemma()
    model, _ = _rotated(copy.deepcopy(original), "rotor")
    for ours, theirs in zip(model.model.layers, original.model.layers):
        for name in ("post_attention_layernorm", "post_feedforward_layernorm"):
            assert torch.equal(getattr(ours, name).weight, getattr(theirs, name).weight)
        assert torch.equal(ours.self_attn.q_norm.weight, theirs.self_attn.q_norm.weight)
    assert torch.equal(model.model.norm.weight, original.model.norm.weight)
    assert torch.equal(model.model.embed_tokens.weight, original.model.embed_tokens.weight)
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.config.tie_word_embeddings
    assert float(model.model.embed_tokens.embed_scale) == pytest.approx(80 ** 0.5)


def test_modes_and_the_projections_r1_rotates():
    gemma, llama = tiny_gemma(layers=1), tiny_llama(1)
    assert fusion.r1_mode(gemma) == "online" and fusion.r1_mode(llama) == "fused"
    assert fusion.r1_projections(gemma) == fusion.READERS
    assert fusion.r1_projections(llama) == fusion.READERS + fusion.WRITERS
    assert fusion.check_architecture(gemma) == "gemma3_text"
    with pytest.raises(ValueError, match="cannot have their residual stream rotated.*apply_r1"):
        fusion.rotate_residual(gemma, torch.eye(80))
    with pytest.raises(ValueError, match="image-text model.*Gemma3ForCausalLM"):
        fusion.check_architecture(SimpleNamespace(config=SimpleNamespace(model_type="gemma3")))
    with pytest.raises(ValueError, match="unknown architecture 'gemma2'.*Gemma-3's text model is supported"):
        fusion.check_architecture(SimpleNamespace(config=SimpleNamespace(model_type="gemma2")))


def test_a_matrix_is_applied_online_as_a_dense_product_and_only_once():
    original = tiny_gemma()
    model = copy.deepcopy(original)
    prepare(model, "hadamard", 0)
    Q = Rotation("cayley", 80, 3)
    with torch.no_grad():
        Q.skew.normal_(0.0, 0.3)
    fusion.apply_r1(model, Q.matrix().detach())
    assert fusion.online_rotation(Q.matrix()).kind == "dense"
    a, b = _logits(original), _logits(model)
    assert float((b - a).abs().max()) <= 2e-5 * float(a.abs().max())
    with pytest.raises(ValueError, match="already applies an online R1"):
        fusion.apply_r1(model, Q)


@pytest.mark.parametrize("width", [80, 640])  # 640: Gemma-3-270M's hidden size, 20 x 32
@pytest.mark.parametrize("family", ["hadamard", "cayley", "butterfly", "rotor"])
def test_the_fast_routes_compute_x_times_the_matrix(family, width):
    rotation = Rotation(family, width, 5, dtype=torch.float64)
    with torch.no_grad():
        for p in rotation.parameters():
            p.normal_(0.0, 0.2)
    online = fusion.online_rotation(rotation)
    x = torch.randn(3, 7, width, dtype=torch.float64)
    Q = rotation.matrix().detach()
    assert torch.allclose(online.matrix, Q, atol=1e-12)
    assert torch.allclose(online(x), x @ Q, atol=1e-12)
    assert torch.allclose(online(x.float()), (x @ Q).float(), atol=1e-5)
    assert torch.allclose(online.matrix @ online.matrix.t(), torch.eye(width, dtype=torch.float64), atol=1e-12)


def test_the_saved_folder_is_a_plain_gemma_computing_the_same_function(tmp_path):
    from transformers import AutoModelForCausalLM

    from galinear.quantize.calibrate import quantize_weights

    class Tokenizer:  # save_pretrained's only need
        def save_pretrained(self, folder):
            pass

    model, _ = _rotated(tiny_gemma(), "butterfly")
    quantize_weights(model, 4, "rtn")
    before = _logits(model)
    folder = save_model(model, Tokenizer(), str(tmp_path / "q"), {"family": "butterfly"})
    assert torch.equal(_logits(model), before)  # the model itself keeps its online parts
    assert all(getattr(b.input_layernorm, fusion._ONLINE_R1, None) is not None for b in model.model.layers)
    loaded = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True, dtype=torch.float32).eval()
    assert type(loaded).__name__ == "Gemma3ForCausalLM" and loaded.config.tie_word_embeddings
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in loaded.modules())
    after = _logits(loaded)
    assert float((after - before).abs().max()) <= 2e-5 * float(before.abs().max())
    prompt = [3, 14, 15, 9, 2, 6]
    assert greedy(loaded, prompt, 12) == greedy(model, prompt, 12)
