"""The KV cache quantized after RoPE, with R3 (galinear.quantize.attention): R3 alone leaves the model's
function as it was; the quantized key is the per-head grid of K after RoPE and R3, recomputed by hand
from the layer's input; removing the quantizer restores the model; deepcopy keeps it; straight-through
rounding passes gradients; the pipeline and the distillation use it."""
import copy
import sys

import pytest
import torch
from transformers import AttentionInterface

from galinear.lm import models
from galinear.quantize import attention, calibrate
from galinear.quantize.config import QuantizeConfig
from galinear.quantize.cost import online_cost
from galinear.quantize.pipeline import install_activation_quantizers, prepare, quantize_model, r3_matrix
from galinear.quantize.study import _finished_rows, _settings, format_table
from galinear.quantize.rotations import Rotation
from galinear.testing.models import tiny_gemma, tiny_llama

KINDS = ("llama", "gemma3")


def _model(kind, dtype=torch.float64):
    if kind == "gemma3":
        return tiny_gemma(dtype)
    model = tiny_llama(2, dtype=dtype)
    with torch.no_grad():  # larger scores, so that attention is far from uniform and R3 has something to change
        for block in models.decoder_layers(model):
            block.self_attn.q_proj.weight.mul_(8)
            block.self_attn.k_proj.weight.mul_(8)
    return model


def _r3(model, seed=5, dtype=torch.float64):
    return Rotation("hadamard", models.attention(models.decoder_layers(model)[0]).head_dim, seed, dtype=dtype).matrix()


def _ids(length=24, seed=0):
    return torch.randint(0, 64, (1, length), generator=torch.Generator().manual_seed(seed))


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


@pytest.fixture
def captured(monkeypatch):
    """The query, key and value every call of transformers' sdpa attention receives, in call order."""
    seen = []
    sdpa = AttentionInterface._global_mapping["sdpa"]

    def recording(module, query, key, value, *args, **kwargs):
        seen.append((module, query.detach().clone(), key.detach().clone(), value.detach().clone()))
        return sdpa(module, query, key, value, *args, **kwargs)

    monkeypatch.setitem(AttentionInterface._global_mapping, "sdpa", recording)
    return seen


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-11), (torch.float32, 2e-5)])
def test_r3_alone_keeps_the_logits(kind, dtype, tol, captured):
    """(q R)(k R)^T = q k^T: with the cache in floating point, R3 changes the model's logits only by float
    rounding (stated tolerance: 1e-11 in float64, 2e-5 in float32), though the query and key it sees differ."""
    model = _model(kind, dtype)
    ids = _ids()
    reference = _logits(model, ids)
    plain = [(q, k) for _, q, k, _ in captured]
    captured.clear()
    attention.install_kv_quantizer(model, 16, _r3(model, dtype=dtype))
    assert model.config._attn_implementation == attention.ATTENTION
    torch.testing.assert_close(_logits(model, ids), reference, rtol=0, atol=tol * float(reference.abs().max()))
    assert len(captured) == len(plain) == len(models.decoder_layers(model))
    for (q0, k0), (_, q, k, _) in zip(plain, captured):
        assert float((q - q0).abs().max()) > 0.1 * float(q0.abs().max())  # rotated, not left as they were
        scores = _scores(q0, k0)
        torch.testing.assert_close(_scores(q, k), scores, rtol=0, atol=tol * float(scores.abs().max()))


def _scores(q, k):
    """q k^T per query head, each key-value head shared by its group of query heads."""
    return q @ k.repeat_interleave(q.shape[1] // k.shape[1], dim=1).transpose(-1, -2)


@pytest.mark.parametrize("kind", KINDS)
def test_r3_alone_keeps_greedy_generation(kind):
    model = _model(kind)
    ids = _ids(6)
    options = dict(max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        reference = model.generate(ids, **options)
        attention.install_kv_quantizer(model, 16, _r3(model))
        rotated = model.generate(ids, **options)
    assert torch.equal(rotated, reference)


@pytest.mark.parametrize("kind", KINDS)
def test_a_quantized_cache_decodes_as_the_whole_window_does(kind):
    """Each token's key and value are quantized on their own grid, so decoding token by token through the
    cache gives the logits of one pass over the whole window (the cache holds the same quantized vectors)."""
    model = _model(kind)
    attention.install_kv_quantizer(model, 4, _r3(model))
    ids = _ids(20)
    whole = _logits(model, ids)
    with torch.no_grad():
        out = model(input_ids=ids[:, :8], use_cache=True)
        steps = [out.logits]
        for t in range(8, ids.shape[1]):
            out = model(input_ids=ids[:, t:t + 1], cache=out.past_key_values, use_cache=True)
            steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=0, atol=1e-10)


def _reference_grid(x, bits):
    """An asymmetric min-max grid per vector of the last axis, written out: s = (max(x, 0) - min(x, 0)) / (2^b - 1),
    z = round(-min / s), x -> s (clamp(round(x / s) + z, 0, 2^b - 1) - z)."""
    low, high = x.amin(-1, keepdim=True).clamp(max=0), x.amax(-1, keepdim=True).clamp(min=0)
    step = (high - low) / (2 ** bits - 1)
    step = torch.where(step > 0, step, torch.ones_like(step))
    zero = torch.round(-low / step)
    return step * (torch.clamp(torch.round(x / step) + zero, 0, 2 ** bits - 1) - zero)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("with_r3, bits", [(False, 4), (True, 4), (True, 2)])
def test_the_cached_key_is_k_after_rope_on_its_grid(kind, with_r3, bits, captured):
    """The key and value the attention reads, recomputed from the layer's input: k_proj (and Gemma-3's k_norm),
    RoPE by transformers' apply_rotary_pos_emb, R3, then a grid per token and head; not the same as K quantized
    before RoPE. At 2 bits every head_dim vector (8 or 16 wide) takes at most 4 values, K quantized before
    RoPE more."""
    model = _model(kind)
    r3 = _r3(model) if with_r3 else None
    attention.install_kv_quantizer(model, bits, r3)
    inputs = {}
    layer = models.attention(models.decoder_layers(model)[1])
    layer.register_forward_pre_hook(lambda module, args, kwargs: inputs.update(kwargs), with_kwargs=True)
    _logits(model, _ids())
    _, _, key, value = [c for c in captured if c[0] is layer][0]
    h = inputs["hidden_states"]
    shape = (*h.shape[:-1], -1, layer.head_dim)
    with torch.no_grad():
        k = layer.k_proj(h).view(shape).transpose(1, 2)
        v = layer.v_proj(h).view(shape).transpose(1, 2)
        if hasattr(layer, "k_norm"):
            k = layer.k_norm(k)
        rope = sys.modules[type(layer).__module__].apply_rotary_pos_emb
        cos, sin = inputs["position_embeddings"]
        _, k_rope = rope(k, k, cos, sin)
        _, k_before = rope(_reference_grid(k, bits), k, cos, sin)
    if r3 is not None:
        k_rope, k_before = k_rope @ r3, k_before @ r3
    expected = _reference_grid(k_rope, bits)
    torch.testing.assert_close(key, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(value, _reference_grid(v, bits), rtol=0, atol=1e-12)
    assert float((key - k_before).abs().max()) > 0.01 * float(k_rope.abs().max())

    def most_values(x):
        return max(len(torch.unique(row)) for row in x.reshape(-1, x.shape[-1]))

    if 2 ** bits < layer.head_dim:
        assert most_values(key) <= 2 ** bits and most_values(value) <= 2 ** bits
        assert most_values(k_before) > 2 ** bits
    assert min(most_values(key), most_values(value)) > 2  # the grid is used, not collapsed


@pytest.mark.parametrize("kind", KINDS)
def test_removing_the_quantizer_restores_the_model(kind):
    model = _model(kind)
    ids = _ids()
    reference = _logits(model, ids)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    attention.install_kv_quantizer(model, 3, _r3(model))
    attention.install_kv_quantizer(model, 4, _r3(model, 9))  # installed again: the settings replaced
    assert attention.kv_quantizer(model)["kvbits"] == 4
    assert not torch.equal(_logits(model, ids), reference)
    assert model.state_dict().keys() == state.keys()  # nothing added to the weights
    attention.remove_kv_quantizer(model)
    assert model.config._attn_implementation == "sdpa" and attention.kv_quantizer(model) is None
    assert not any(hasattr(m, attention._R3) or hasattr(m, attention._BITS) for m in model.modules())
    assert torch.equal(_logits(model, ids), reference)
    attention.remove_kv_quantizer(model)  # nothing installed: nothing to do


def test_the_implementation_the_model_had_comes_back():
    model = _model("llama")
    model.set_attn_implementation("eager")
    attention.install_kv_quantizer(model, 4)
    attention.remove_kv_quantizer(model)
    assert model.config._attn_implementation == "eager"


@pytest.mark.parametrize("kind", KINDS)
def test_deepcopy_keeps_the_quantizer_and_is_independent(kind):
    model = _model(kind)
    ids = _ids()
    attention.install_kv_quantizer(model, 4, _r3(model))
    quantized = _logits(model, ids)
    twin = copy.deepcopy(model)
    assert twin.config._attn_implementation == attention.ATTENTION
    assert torch.equal(_logits(twin, ids), quantized)
    attention.remove_kv_quantizer(twin)
    assert model.config._attn_implementation == attention.ATTENTION
    assert torch.equal(_logits(model, ids), quantized)


@pytest.mark.parametrize("kind", KINDS)
def test_straight_through_rounding_passes_gradients(kind):
    """The loss's gradient with respect to k_proj's weight (upstream of the quantized key) is finite and nonzero
    with straight-through rounding, and zero without it (rounding's own gradient)."""
    grads = {}
    for ste in (True, False):
        model = _model(kind, torch.float32)
        attention.install_kv_quantizer(model, 4, _r3(model, dtype=torch.float32), straight_through=ste)
        weight = models.projection(model, 0, "k_proj").weight
        weight.requires_grad_(True)
        ids = _ids()
        logits = model(input_ids=ids, use_cache=False).logits
        torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
        grads[ste] = weight.grad
    assert torch.isfinite(grads[True]).all() and float(grads[True].abs().max()) > 0
    assert grads[False] is None or float(grads[False].abs().max()) == 0


def test_bad_input_is_refused_clearly():
    model = _model("llama")
    with pytest.raises(ValueError, match="--kvbits: KV cache bit width"):
        attention.install_kv_quantizer(model, 1)
    with pytest.raises(ValueError, match=r"head_dim x head_dim matrix \(8 x 8"):
        attention.install_kv_quantizer(model, 4, torch.eye(4))
    with pytest.raises(ValueError, match="must be orthogonal"):
        attention.install_kv_quantizer(model, 4, 2 * torch.eye(8))
    with pytest.raises(ValueError, match="needs a transformers model, got Linear; supported: models whose attention"):
        attention.install_kv_quantizer(torch.nn.Linear(2, 2), 4)
    assert model.config._attn_implementation == "sdpa" and attention.kv_quantizer(model) is None


def test_the_pipeline_quantizes_the_cache_after_rope(tmp_path):
    model = _model("llama", torch.float32)
    install_activation_quantizers(model, 16, 4, r3=r3_matrix(model, "hadamard", 0, 4))
    assert model.config._attn_implementation == attention.ATTENTION
    assert not any(m._forward_hooks for m in model.modules())  # no k_proj / v_proj output hooks any more
    assert attention.kv_quantizer(model)["r3"] is not None
    assert r3_matrix(model, "none", 0, 4) is None and r3_matrix(model, "rotor", 0, 16) is None
    assert torch.equal(r3_matrix(model, "rotor", 3, 4), Rotation("hadamard", 8, 3 + 104729).matrix())

    calib = [torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i)) for i in range(2)]
    config = QuantizeConfig(wbits=8, abits=16, kvbits=4, steps=1, tokens_per_step=8, out_dir=str(tmp_path))
    for family in ("none", "rotor"):
        quantized = tiny_llama(2)
        result = quantize_model(quantized, config, family, 0, calib)
        assert result["r3"] == (family != "none")
        assert attention.kv_quantizer(quantized)["kvbits"] == 4
        assert (attention.kv_quantizer(quantized)["r3"] is not None) == (family != "none")
    assert (tmp_path / "calibration" / "rotor-distill-w8a16kv4-s0.safetensors").exists()
    cost = online_cost(quantized, tokens=8, repeats=1)
    assert cost["r3"]["head_dim"] == 8 and cost["r3"]["dense_ms"] > 0 and cost["r3"]["fast_ms"] > 0
    rows = [{"family": "none", "seed": 0, "wikitext_ln_ppl": 1.0, "heldout_ln_ppl": 1.0}]
    assert "K quantized after RoPE" in format_table(rows, config)
    assert "after RoPE" not in format_table(rows, QuantizeConfig())


def test_a_study_that_quantized_k_before_rope_is_not_resumed(tmp_path):
    from galinear import _io

    path = str(tmp_path / "results.json")
    rows = [{"family": "float (not quantized)", "seed": None, "wikitext_ln_ppl": 3.0}]
    for kvbits in (16, 4):
        old = _settings(QuantizeConfig(out_dir=str(tmp_path), kvbits=kvbits))
        old.pop("kv_cache", None)  # a file written before the cache was quantized after RoPE
        _io.save_json(path, {"settings": old, "rows": rows, "online": None})
        config = QuantizeConfig(out_dir=str(tmp_path), kvbits=kvbits)
        if kvbits == 16:
            assert _finished_rows(path, config)[0]["float"]["wikitext_ln_ppl"] == 3.0
        else:
            with pytest.raises(ValueError, match=r"kv_cache differ"):
                _finished_rows(path, config)
            _io.save_json(path, {"settings": _settings(config), "rows": rows, "online": None})
            assert _finished_rows(path, config)[0]["float"]["wikitext_ln_ppl"] == 3.0


@pytest.mark.parametrize("kind", KINDS)
def test_the_distillation_quantizes_the_cache_and_leaves_the_model(kind, tmp_path):
    from galinear import _io

    base = _model(kind, torch.float32)
    histories = {}
    for kvbits in (16, 4):
        model = copy.deepcopy(base)
        rotation = prepare(model, "rotor", 0, chunk=16)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        path = str(tmp_path / f"{kind}-{kvbits}.safetensors")
        windows = [torch.randint(0, 64, (10,), generator=torch.Generator().manual_seed(i)) for i in range(2)]
        result = calibrate.distill_rotation(model, rotation, windows, wbits=4, steps=2, lr=0.05, checkpoint=path,
                                            kvbits=kvbits, r3=r3_matrix(model, "rotor", 0, kvbits))
        histories[kvbits] = result["history"]
        assert all(torch.isfinite(torch.tensor(result["history"])))
        assert model.config._attn_implementation == "sdpa" and attention.kv_quantizer(model) is None
        after = model.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before)
        settings = _io.load_state(path, pickles=False)["settings"]
        assert ("kvbits" in settings) == (kvbits < 16) and settings.get("r3", True)
    assert histories[4][0] != histories[16][0]  # the same first window, now through the quantized cache
