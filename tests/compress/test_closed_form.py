"""Closed-form baselines: second-moment loss, reduced-rank regression, per-block least squares."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study
from galinear.compress.fitting import closed_form, heldout_error
from galinear.nn import BlockHadamardLinear, LowRankLinear  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS  # noqa: E402


def _data(n=400, d_in=12, d_out=9, seed=0, cross=False, bias=False):
    """Correlated inputs x, original inputs x_o (= x unless cross), a projection W, b."""
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d_in, d_in))
    xo = rng.normal(size=(n, d_in)) @ mix + rng.normal(size=d_in)
    x = xo + 0.3 * rng.normal(size=(n, d_in)) if cross else xo
    w = rng.normal(size=(d_out, d_in))
    b = rng.normal(size=d_out) if bias else None
    y = xo @ w.T + (0 if b is None else b)
    return x, xo, w, b, y


def _moments(x, xo, w, b, cross, chunk=64):
    acc = closed_form.SecondMoments(x.shape[1])
    for i in range(0, len(x), chunk):  # streamed in chunks
        if cross:
            acc.update(torch.as_tensor(x[i:i + chunk]), torch.as_tensor(xo[i:i + chunk]))
        else:
            acc.update(torch.as_tensor(x[i:i + chunk]))
    return acc.regression(torch.as_tensor(w), None if b is None else torch.as_tensor(b))


def _rrr_numpy(x, y, rank, bias):
    """Reduced-rank regression from the data matrices: lstsq, then project on the top singular
    directions of the fitted values (Izenman 1975)."""
    if bias:
        mx, my = x.mean(0), y.mean(0)
        x, y = x - mx, y - my
    coef = np.linalg.lstsq(x, y, rcond=None)[0]          # (d_in, d_out): x @ coef ~ y
    _, _, vt = np.linalg.svd(x @ coef, full_matrices=False)
    v = vt[:rank].T
    m = (coef @ v @ v.T).T                                # (d_out, d_in)
    c = (my - m @ mx) if bias else None
    return m, c


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_second_moment_loss_equals_tokenwise_mse(cross, bias):
    x, xo, w, b, y = _data(cross=cross, bias=bias, seed=3)
    reg = _moments(x, xo, w, b, cross)
    torch.manual_seed(0)
    for module in (LowRankLinear(12, 9, rank=2, bias=bias), BlockHadamardLinear(12, 9, blocks=3, bias=bias),
                   torch.nn.Linear(12, 9, bias=bias)):
        module = module.double()
        if bias:
            torch.nn.init.normal_(module.bias)
        tokenwise = heldout_error.mse(module, torch.as_tensor(x), torch.as_tensor(y))
        assert closed_form.module_mse(module, reg) == pytest.approx(tokenwise, rel=1e-9)
    assert reg.target_mean_square() == pytest.approx(float(np.mean(y ** 2)), rel=1e-12)


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rank", [1, 3])
def test_low_rank_fit_is_the_reduced_rank_regression_optimum(rank, bias, cross):
    x, xo, w, b, y = _data(cross=cross, bias=bias, seed=rank)
    y = y + 0.5 * np.random.default_rng(9).normal(size=y.shape)  # noise: not exactly low rank
    reg = _explicit(x, y, bias)  # noisy targets: moments of explicit (x, y) rows
    module = LowRankLinear(12, 9, rank=rank, bias=bias).double()
    stats = closed_form.fit_module(module, reg)
    assert stats["ridge"] == 0.0 and stats["rows"] == len(x)
    expected, c = _rrr_numpy(x, y, rank, bias)
    got = module.dense_weight().detach().numpy()
    assert np.allclose(got, expected, atol=1e-8 * np.abs(expected).max())
    if bias:
        assert np.allclose(module.bias.detach().numpy(), c, atol=1e-8)
    tokenwise = heldout_error.mse(module, torch.as_tensor(x), torch.as_tensor(y))
    assert stats["train_mse"] == pytest.approx(tokenwise, rel=1e-8)
    # no rank-r map does better: random perturbations of the factors and a gradient fit
    rng = np.random.default_rng(0)
    for _ in range(20):
        other = LowRankLinear(12, 9, rank=rank, bias=bias).double()
        with torch.no_grad():
            other.up.copy_(module.up + 0.01 * torch.as_tensor(rng.normal(size=module.up.shape)))
            other.down.copy_(module.down + 0.01 * torch.as_tensor(rng.normal(size=module.down.shape)))
            if bias:
                other.bias.copy_(module.bias)
        assert heldout_error.mse(other, torch.as_tensor(x), torch.as_tensor(y)) >= tokenwise * (1 - 1e-12)


def _explicit(x, y, bias):
    """Moments of explicit (x, y) rows: y = I y, i.e. x_o = y and W = identity, through a wrapper."""
    n, d_in = x.shape
    d_out = y.shape[1]
    acc = closed_form.SecondMoments(d_in, d_out)
    acc.update(torch.as_tensor(x), torch.as_tensor(y))
    return acc.regression(torch.eye(d_out, dtype=torch.float64), torch.zeros(d_out, dtype=torch.float64)
                          if bias else None)


@pytest.mark.parametrize("d_in, d_out, blocks", [(12, 9, 3), (10, 7, 3), (16, 4, 4)])
@pytest.mark.parametrize("bias", [False, True])
def test_block_solve_equals_lstsq_per_block(d_in, d_out, blocks, bias):
    x, xo, w, b, y = _data(n=300, d_in=d_in, d_out=d_out, seed=d_in + blocks, bias=bias)
    y = y + 0.2 * np.random.default_rng(1).normal(size=y.shape)
    reg = _explicit(x, y, bias)
    module = BlockHadamardLinear(d_in, d_out, blocks=blocks, bias=bias).double()
    closed_form.fit_module(module, reg)
    got = module.dense_weight().detach().numpy()
    bi, bo = module.block_in, module.block_out
    if bias:  # the intercept is fitted with the blocks: centre inside each block's lstsq
        xc, yc = x - x.mean(0), y - y.mean(0)
    else:
        xc, yc = x, y
    expected = np.zeros((d_out, d_in))
    for g in range(blocks):
        i0, i1 = g * bi, min((g + 1) * bi, d_in)
        o0, o1 = g * bo, min((g + 1) * bo, d_out)
        if i1 <= i0 or o1 <= o0:
            continue
        expected[o0:o1, i0:i1] = np.linalg.lstsq(xc[:, i0:i1], yc[:, o0:o1], rcond=None)[0].T
    assert np.allclose(got, expected, atol=1e-9 * max(1.0, np.abs(expected).max()))
    if bias:
        assert np.allclose(module.bias.detach().numpy(), y.mean(0) - expected @ x.mean(0), atol=1e-9)


def test_singular_inputs_get_a_ridge():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 12))  # fewer rows than features
    reg = _explicit(x, x[:, :4] * 2.0, False)
    module = LowRankLinear(12, 4, rank=1).double()
    stats = closed_form.fit_module(module, reg)
    assert stats["ridge"] > 0 and np.isfinite(module.dense_weight().detach().numpy()).all()


def test_moments_round_trip(tmp_path):
    x, xo, w, b, y = _data(cross=True)
    acc = closed_form.SecondMoments(12)
    acc.update(torch.as_tensor(x), torch.as_tensor(xo))
    acc.save(str(tmp_path / "m.safetensors"))
    back = closed_form.SecondMoments.load(str(tmp_path / "m.safetensors"))
    assert back.n == acc.n and back.same is False
    for name in ("sx", "sxx", "so", "sxo", "soo"):
        assert np.array_equal(getattr(back, name), getattr(acc, name)) and getattr(back, name).dtype == np.float64
    assert closed_form.SecondMoments.load(str(tmp_path / "missing.safetensors")) is None


def test_moments_of_another_shape_or_kind_are_a_miss(tmp_path, capsys):
    """A state file that is not a set of sums (wrong names, shapes or dtypes) is removed, not used."""
    from galinear import _io

    path = str(tmp_path / "m.safetensors")
    good = closed_form.SecondMoments(3).update(np.ones((2, 3)))
    for broken in ({"n": 2}, {"n": 2, "same": True, "sx": np.zeros(3), "sxx": np.zeros((2, 2)), "so": np.zeros(3),
                              "sxo": np.zeros((3, 3)), "soo": np.zeros((3, 3))},
                   {"n": 2, "same": True, "sx": np.zeros(3, dtype=np.float32), "sxx": good.sxx, "so": good.so,
                    "sxo": good.sxo, "soo": good.soo}):
        _io.save_state(path, broken)
        assert closed_form.SecondMoments.load(path) is None and not (tmp_path / "m.safetensors").exists()
    assert capsys.readouterr().err.count("recomputing this unit") == 3


def test_study_with_closed_form_baselines(tmp_path, tiny):
    config = tiny_config(tmp_path, methods=("lr1", "lr1-cf", "lr4-cf", "bh1-cf"), layer_sets=((1,), (0, 2)),
                         seeds=(0, 1), multi_seeds=(0,), datasets=("a",))
    study = Study(config, tiny, texts=TEXTS)
    plan = study.plan()
    assert [p for p in plan if p[0] == "lr1-cf"] == [("lr1-cf", 0, (1,)), ("lr1-cf", 0, (0, 2))]  # one seed
    entries = study.run()["entries"]
    got = {(e["method"], tuple(e["layers"]), e["seed"]): e for e in entries.values() if e["method"] != "original"}
    for layers in ((1,), (0, 2)):
        cf, adam = got[("lr1-cf", layers, 0)], got[("lr1", layers, 0)]
        assert np.isfinite(cf["log_ppl"]) and cf["params_per_layer"] == adam["params_per_layer"]
    # on the single layer (same inputs for both fits) the exact fit has the lower training loss
    spec = study.config.method_spec("lr1-cf")
    fitted = study.fit_layer_set(spec, 0, (1,))
    stats = fitted.stats[(1, "q_proj")].to_dict()
    x, _ = study.captures.original(1)
    orig = study.model.model.layers[1].self_attn.q_proj
    tokenwise = heldout_error.mse(fitted.replacements[(1, "q_proj")], x, x @ orig.weight.T)
    assert stats["train_mse"] == pytest.approx(tokenwise, rel=1e-4)
    adam = study.fit_layer_set(study.config.method_spec("lr1"), 0, (1,))
    assert tokenwise <= heldout_error.mse(adam.replacements[(1, "q_proj")], x, x @ orig.weight.T) + 1e-9
    # moments of the pair's layer 2 come from the network with layer 0 replaced by the closed-form fit
    import os

    names = os.listdir(os.path.join(study.work, "moments"))
    assert any(n.startswith("lr1-cf-s0-P0-attn_in-L2") for n in names), names


def test_rotor_linear_fitted_on_moments_matches_the_tokenwise_loss():
    from galinear.nn import RotorLinear

    x, xo, w, b, y = _data(n=300, d_in=8, d_out=4, seed=2, bias=True)
    reg = _explicit(x, y, True)
    torch.manual_seed(0)
    module = RotorLinear(8, 4, bias=True).double()
    start = heldout_error.mse(module, torch.as_tensor(x), torch.as_tensor(y))
    stats = closed_form.fit_on_moments(module, reg, max_steps=60, eval_every=5, patience=3)
    tokenwise = heldout_error.mse(module, torch.as_tensor(x), torch.as_tensor(y))
    assert stats["train_mse"] == pytest.approx(tokenwise, rel=1e-8) and tokenwise < start
    assert stats["moment_curve"][0][0] == 0 and stats["best_step"] <= stats["steps"] <= 60


def test_study_with_a_moment_fitted_rotor_linear(tmp_path, tiny):
    config = tiny_config(tmp_path, methods=("rotorlin-m",), layer_sets=((0, 2),), datasets=("a",), seeds=(0, 1),
                         max_steps=20, eval_every=5, patience=2)
    study = Study(config, tiny, texts=TEXTS)
    assert [p[1] for p in study.plan()] == [0, 1]  # seeded (random initialisation)
    entries = study.run()["entries"]
    rows = [e for e in entries.values() if e["method"] == "rotorlin-m"]
    assert len(rows) == 2 and all(np.isfinite(e["log_ppl"]) for e in rows)
    assert rows[0]["fit"].startswith("Adam on all-row moments")


def test_streamed_moments_of_a_partly_compressed_network(tmp_path, tiny):
    """The pair's layer 2: moments streamed window chunk by chunk equal those of the whole capture."""
    from galinear.compress.fitting import activations, surgery

    study = Study(tiny_config(tmp_path, methods=("lr1-cf",), layer_sets=((0, 2),), datasets=("a", "b")), tiny,
                  texts=TEXTS)
    spec = study.config.method_spec("lr1-cf")
    fitted = study.fit_layer_set(spec, 0, (0, 2))
    layer0 = {k: v for k, v in fitted.replacements.items() if k[0] == 0}
    with surgery.swapped(study.model, layer0):
        x_in = activations.capture(study.model, 2, study.captures.train_ids())
    x_orig = activations.capture(study.model, 2, study.captures.train_ids())
    expected = closed_form.SecondMoments(32).update(x_in, x_orig)
    import os

    streamed = closed_form.SecondMoments.load(os.path.join(study.work, "moments", "lr1-cf-s0-P0-attn_in-L2-train.safetensors"))
    assert streamed.n == expected.n == len(study.captures.train_ids()) * 32 and streamed.same is False
    for name in ("sx", "sxx", "so", "sxo", "soo"):
        assert np.allclose(getattr(streamed, name), getattr(expected, name), rtol=1e-9, atol=1e-9), name
