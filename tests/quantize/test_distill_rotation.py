"""Rotations learned by distillation (galinear.quantize.calibrate.distill_rotation): the network the
loss runs is the quantized model that fusion and RTN make, for fused (Llama) and online (Gemma-3) R1;
an interrupted calibration resumes bit for bit; the start is kept when training did not improve the
calibration KL."""
import copy

import pytest
import torch
from torch.func import functional_call

from galinear.lm import models
from galinear.quantize import calibrate, fusion, optimise
from galinear.quantize.quantizers import quantize_weight
from galinear.quantize.pipeline import prepare
from galinear.quantize.rotations import Rotation
from galinear.testing.models import tiny_causal_lm, tiny_gemma, tiny_llama


def _moved(rotation, scale=0.3, seed=3):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in rotation.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return rotation


def _student_logits(model, rotation, ids, wbits):
    weights = calibrate._RotatedWeights(model, rotation, wbits, True)
    Q = rotation.matrix()
    handles = [norm.register_forward_hook(lambda m, a, out: out @ Q.to(out.dtype)) for norm in weights.norms]
    try:
        with torch.no_grad():
            return functional_call(model, weights.parameters(), (), {"input_ids": ids, "use_cache": False}).logits
    finally:
        for handle in handles:
            handle.remove()


@pytest.mark.parametrize("kind, family, layers", [("llama", "rotor", 1), ("llama", "rotor", 3), ("llama", "butterfly", 1),
                                                  ("llama", "cayley", 1), ("qwen2", "rotor", 2), ("gemma3", "rotor", 2),
                                                  ("gemma3", "cayley", 1)])
def test_the_distilled_network_is_the_fused_model(kind, family, layers):
    """float64: the student's weights before rounding are those apply_r1 fuses (its logits equal the fused
    model's), and rounded they are RTN's grid points of them. (Rounded logits are not compared: the
    largest magnitude of a row sits on a rounding tie, which float noise of another product order flips.)"""
    if kind == "gemma3":
        model = tiny_gemma(torch.float64)
    else:
        model = tiny_causal_lm(kind, 2).to(torch.float64)
    width = model.config.hidden_size
    rotation = prepare(model, family, 1, chunk=16 if width % 16 == 0 else None, dtype=torch.float64, layers=layers)
    _moved(rotation)
    ids = torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(0))
    student = _student_logits(model, rotation, ids, None)
    fused = copy.deepcopy(model)
    fusion.apply_r1(fused, rotation)
    with torch.no_grad():
        reference = fused(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(student, reference, rtol=1e-9, atol=1e-9)
    plain = calibrate._RotatedWeights(model, rotation, None, True).parameters()
    rounded = calibrate._RotatedWeights(model, rotation, 4, True).parameters()
    names = {id(p): n for n, p in fused.named_parameters()}
    for index in range(2):
        for name in calibrate.LINEARS:
            key = names[id(models.projection(fused, index, name).weight)]
            torch.testing.assert_close(plain[key], models.projection(fused, index, name).weight, rtol=1e-9, atol=1e-12)
            assert torch.equal(rounded[key], quantize_weight(plain[key], 4))


def _windows(count=3, length=10):
    generator = torch.Generator().manual_seed(4)
    return [torch.randint(0, 64, (length,), generator=generator) for _ in range(count)]


@pytest.mark.parametrize("family", ["rotor", "butterfly"])
def test_an_interrupted_distillation_resumes_bit_exact(tmp_path, family):
    base = tiny_llama(2)
    options = dict(wbits=3, abits=6, steps=5, lr=0.05, seed=2, tokens_per_step=8, checkpoint_every=2)

    def fresh():
        model = copy.deepcopy(base)
        return model, prepare(model, family, 0, chunk=16)

    model, straight = fresh()
    whole = calibrate.distill_rotation(model, straight, _windows(), checkpoint=str(tmp_path / "a.safetensors"),
                                       **options)
    assert whole["steps"] == 5 and "calibration_kl" in whole
    model, resumed = fresh()
    path = str(tmp_path / "b.safetensors")
    first = calibrate.distill_rotation(model, resumed, _windows(), checkpoint=path, stop_after=4, **options)
    assert first["steps"] == 4 and "calibration_kl" not in first  # interrupted: nothing chosen yet
    model, again = fresh()  # a new process: nothing kept but the file
    second = calibrate.distill_rotation(model, again, _windows(), checkpoint=path, **options)
    assert second["resumed_from"] == 4 and second["history"] == whole["history"]
    assert second["calibration_kl"] == whole["calibration_kl"]
    for a, b in zip(straight.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


def test_the_model_is_left_as_it_was():
    model = tiny_llama(2)
    rotation = prepare(model, "rotor", 0, chunk=16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calibrate.distill_rotation(model, rotation, _windows(), wbits=4, steps=2, lr=0.05)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not any(module._forward_hooks or module._forward_pre_hooks
                   for module in model.modules() if not hasattr(module, "_galinear_online_hadamard"))


def test_the_start_is_kept_when_training_does_not_help():
    rotation = _moved(Rotation("rotor", 32, seed=0, chunk=16))
    trained = {k: v.clone() for k, v in rotation.state_dict().items()}
    # a score that prefers the start (all learned parameters zero)
    kept = optimise.keep_better(rotation, lambda: float(sum(p.detach().abs().sum() for p in rotation.parameters())))
    assert kept["calibration_kl"]["kept"] == "start"
    assert all(float(p.detach().abs().max()) == 0 for p in rotation.parameters())
    rotation.load_state_dict(trained)
    kept = optimise.keep_better(rotation, lambda: -float(sum(p.detach().abs().sum() for p in rotation.parameters())))
    assert kept["calibration_kl"]["kept"] == "trained"
    assert all(torch.equal(v, trained[k]) for k, v in rotation.state_dict().items())
