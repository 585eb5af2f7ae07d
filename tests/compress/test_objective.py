"""The joint objectives of galinear.compress.fitting.objective against independent computations."""
import io
import math

import numpy as np
import pytest

from galinear._progress import Progress
from galinear.testing.models import tiny_llama

torch = pytest.importorskip("torch")

from galinear.compress.fitting import activations, projection, surgery
from galinear.compress.storage import checkpoints
from galinear.compress.methods import catalogue as methods
from galinear.compress.fitting import objective
from galinear.optim.loop import Plateau  # noqa: E402

LAYER = 1


def _rope_theta(config) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def manual_attention(model, layer, x, wq, wk, wv):
    """Causal multi-head attention with RoPE and grouped key/value heads, written out by hand
    (no transformers code): the o_proj output for inputs x (windows, L, width)."""
    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    d = config.hidden_size // heads
    w, length, _ = x.shape
    q = (x @ wq.T).reshape(w, length, heads, d).transpose(1, 2)
    k = (x @ wk.T).reshape(w, length, kv_heads, d).transpose(1, 2)
    v = (x @ wv.T).reshape(w, length, kv_heads, d).transpose(1, 2)
    # the angles in float32, as the model computes them (its cos/sin carry float32 rounding)
    inv = 1.0 / _rope_theta(config) ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)

    def rope(t):
        a, b = t[..., :d // 2], t[..., d // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    q, k = rope(q), rope(k)
    group = heads // kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(torch.triu(torch.ones(length, length, dtype=torch.bool), 1), -math.inf)
    out = torch.softmax(scores, dim=-1) @ v
    o = models_attention(model, layer).o_proj.weight
    return out.transpose(1, 2).reshape(w, length, heads * d) @ o.T


def models_attention(model, layer):
    from galinear.lm.models import attention, decoder_layers

    return attention(decoder_layers(model)[layer])


def _windows(count=3, length=12, seed=0):
    return np.random.default_rng(seed).integers(0, 64, (count, length))


def _linear(d_in, d_out, seed, dtype):
    torch.manual_seed(seed)
    return torch.nn.Linear(d_in, d_out, bias=False).to(dtype)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_attention_output_matches_a_hand_written_attention(dtype, tol):
    model = tiny_llama(dtype=dtype)
    ids = _windows()
    x = activations.capture(model, LAYER, ids).reshape(len(ids), ids.shape[1], -1)
    call = objective.attention_call(model, LAYER, ids.shape[1])
    reps = {"q_proj": _linear(32, 32, 1, dtype), "k_proj": _linear(32, 16, 2, dtype), "v_proj": _linear(32, 16, 3, dtype)}
    got = objective.attention_output(model, LAYER, x, call, reps)
    want = manual_attention(model, LAYER, x, reps["q_proj"].weight, reps["k_proj"].weight, reps["v_proj"].weight)
    assert torch.allclose(got, want, atol=tol, rtol=tol), float((got - want).abs().max().detach())
    # the projections were restored
    attn = models_attention(model, LAYER)
    assert isinstance(attn.q_proj, torch.nn.Linear) and attn.q_proj is not reps["q_proj"]


def test_attention_target_is_the_layers_real_o_proj_output():
    """Without replacements the objective's target is what o_proj outputs in a full forward."""
    model = tiny_llama(dtype=torch.float64)
    ids = _windows(2, 10)
    seen = []
    handle = models_attention(model, LAYER).o_proj.register_forward_hook(lambda m, a, out: seen.append(out.detach()))
    with torch.no_grad():
        model(input_ids=torch.as_tensor(ids), use_cache=False)
    handle.remove()
    x = activations.capture(model, LAYER, ids).reshape(2, 10, -1)
    obj = objective.LayerObjective(model, LAYER, "attention", x, x)
    assert torch.allclose(obj._targets, seen[0], atol=1e-12, rtol=0)


def test_attention_loss_equals_the_direct_mse():
    model = tiny_llama(dtype=torch.float64)
    ids = _windows(3, 12)
    x = activations.capture(model, LAYER, ids).reshape(3, 12, -1)
    x_in = x + 0.01 * torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=x.dtype)
    obj = objective.LayerObjective(model, LAYER, "attention", x_in, x)
    reps = {"q_proj": _linear(32, 32, 1, torch.float64), "k_proj": _linear(32, 16, 2, torch.float64),
            "v_proj": _linear(32, 16, 3, torch.float64)}
    attn = models_attention(model, LAYER)
    want_out = manual_attention(model, LAYER, x_in, *(reps[p].weight for p in ("q_proj", "k_proj", "v_proj"))).detach()
    target = manual_attention(model, LAYER, x, attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)
    idx = torch.tensor([2, 0])
    want = float(((want_out[idx] - target[idx]) ** 2).mean())
    assert float(obj.loss(reps, idx).detach()) == pytest.approx(want, rel=1e-10)
    assert obj.value(reps) == pytest.approx(float(((want_out - target) ** 2).mean()), rel=1e-10)
    assert obj.target_mean_square() == pytest.approx(float((target ** 2).mean()), rel=1e-10)


def test_logits_objective_is_the_kl_of_full_forwards():
    model = tiny_llama(dtype=torch.float64)
    ids = _windows(2, 10)
    res = activations.residual_inputs(model, LAYER, ids)
    obj = objective.LayerObjective(model, LAYER, "logits", res, res)
    reps = {"q_proj": _linear(32, 32, 1, torch.float64), "k_proj": _linear(32, 16, 2, torch.float64),
            "v_proj": _linear(32, 16, 3, torch.float64)}
    with torch.no_grad():
        p = torch.log_softmax(model(input_ids=torch.as_tensor(ids), use_cache=False).logits, -1)
        with surgery.swapped(model, {(LAYER, k): m for k, m in reps.items()}):
            q = torch.log_softmax(model(input_ids=torch.as_tensor(ids), use_cache=False).logits, -1)
    want = float((p.exp() * (p - q)).sum(-1).mean())
    assert want > 0
    assert obj.value(reps) == pytest.approx(want, rel=1e-6)


def _lr_modules(seed=0):
    torch.manual_seed(seed)
    spec = methods.MethodSpec("lr4")
    return {p: methods.build_module(spec, 32, 32 if p == "q_proj" else 16) for p in ("q_proj", "k_proj", "v_proj")}


def test_joint_fit_lowers_the_objective_and_is_deterministic():
    model = tiny_llama()
    ids = _windows(4, 16)
    x = activations.capture(model, LAYER, ids).reshape(4, 16, -1)
    obj = objective.LayerObjective(model, LAYER, "attention", x, x)
    results = []
    for _ in range(2):
        mods = _lr_modules()
        before = obj.value(mods)
        stats = objective.fit_layer(mods, obj, lr=0.05, steps=30, seed=3)
        results.append((stats["final_loss"], [m.state_dict() for m in mods.values()]))
        assert stats["steps"] == 30 and obj.value(mods) < 0.5 * before
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_joint_fit_until_converged_restores_the_best_validation_point():
    model = tiny_llama()
    ids = _windows(6, 16)
    x = activations.capture(model, LAYER, ids).reshape(6, 16, -1)
    train = objective.LayerObjective(model, LAYER, "attention", x[:4], x[:4])
    valid = objective.LayerObjective(model, LAYER, "attention", x[4:], x[4:])
    mods = _lr_modules()
    stats = objective.fit_layer(mods, train, lr=0.05, valid=valid, max_steps=40, eval_every=5, patience=2)
    best = min(v for _, v in stats["curve"])
    assert stats["valid_loss"] == best
    assert valid.value(mods) == pytest.approx(best, rel=1e-6)
    assert [s for s, _ in stats["curve"]][:2] == [0, 5]


def test_plateau_follows_the_rule_by_hand():
    p = Plateau(patience=2, min_delta=0.1, decay=0.5, decays=1)
    trace = [(p.update(v, s), p.decay_now(), p.stopped) for s, v in enumerate([1.0, 0.8, 0.79, 0.85, 0.9, 0.95])]
    assert trace == [("better", False, False), ("better", False, False), ("slight", False, False),
                     ("worse", True, False), ("worse", False, False), ("worse", False, True)]
    assert (p.best, p.best_step) == (0.79, 2)


def test_bad_objective_names_the_choices():
    with pytest.raises(ValueError, match="qkv, attention, logits"):
        objective.check_objective("kl")
    with pytest.raises(ValueError, match="inputs must be"):
        objective.LayerObjective(tiny_llama(), LAYER, "attention", torch.zeros(5, 32), torch.zeros(5, 32))
    with pytest.raises(ValueError, match="spec objective"):
        methods.MethodSpec("lr1-cf", objective="attention")


def test_progress_in_a_log_is_one_line_per_unit_without_carriage_returns():
    stream = io.StringIO()
    bar = Progress(5, "fit q", stream=stream, every=0.0)
    for n in range(1, 6):
        bar.step(n, "loss 1")
    bar.close("5 steps")
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()
    assert lines[-1].startswith("fit q: 5 steps (") and lines[-1].endswith(" s)")
    assert len(lines) == 6  # every = 0: a line per step, then the closing line
    quiet = io.StringIO()
    bar = Progress(5, "fit q", stream=quiet)  # the default: at most one line a minute
    for n in range(1, 6):
        bar.step(n)
    bar.close()
    assert quiet.getvalue().count("\n") == 1


def test_fit_progress_on_stderr_in_a_log(capsys):
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    module = torch.nn.Linear(8, 4, bias=False)
    projection.fit_projection(module, x, x, torch.randn(4, 8), lr=0.01, epochs=2, batch_size=16, progress="fit demo")
    err = capsys.readouterr().err
    assert "\r" not in err and err.count("\n") == 1 and err.startswith("fit demo: 8 steps")


@pytest.mark.parametrize("name", ["attention", "logits"])
def test_study_with_a_joint_objective(tmp_path, name):
    """--objective through a Study: one joint fit per layer, checkpoints per projection, cached apart."""
    from galinear.compress import Study
    from galinear.lm.models import LoadedModel

    from galinear.testing.compression import tiny_config
    from galinear.testing.models import TEXTS, CharTokenizer

    config = tiny_config(tmp_path, methods=("lr1", "lr1-cf"), layer_sets=((1, 2),), datasets=("a",), objective=name,
                         epochs=1.0)
    study = Study(config, LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama"), texts=TEXTS)
    entries = study.run()["entries"]
    rows = {e["tag"]: e for e in entries.values() if e.get("method") != "original"}
    assert set(rows) == {f"lr1-e1-lr0.05-obj{name}", "lr1-cf"}
    joint = rows[f"lr1-e1-lr0.05-obj{name}"]
    assert f"({name} objective)" in joint["fit"] and np.isfinite(joint["log_ppl"])
    spec = config.method_spec("lr1")
    assert spec.objective == name and config.method_spec("lr1-cf").objective == "qkv"
    for layer in (1, 2):
        units = [checkpoints.load(study.store.unit_path(spec, 0, (1,) if layer == 2 else (), layer, p))
                 for p in ("q_proj", "k_proj", "v_proj")]
        assert all(u["stats"]["objective"] == name for u in units)
        assert len({u["stats"]["final_loss"] for u in units}) == 1  # one joint fit
        # its time is counted once in the row: the units' shares add up to the joint fit's seconds
        assert sum(u["stats"]["seconds"] for u in units) == pytest.approx(units[0]["stats"]["joint_seconds"])
    assert joint["fit_seconds"] == pytest.approx(sum(
        checkpoints.load(study.store.unit_path(spec, 0, (1,) if layer == 2 else (), layer, "q_proj"))["stats"][
            "joint_seconds"] for layer in (1, 2)))
