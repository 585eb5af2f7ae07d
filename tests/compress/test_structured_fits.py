"""Closed-form fits of the structured baselines from second moments, the new methods and the budget helper.

Float64 throughout (the fits run in float64); tolerances: 1e-8 relative for fits against numpy
solves on the raw rows, exact integers for parameter counts.
"""
import re

import numpy as np
import pytest
import scipy.linalg

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from galinear.compress.methods import budgets
from galinear.compress.fitting import closed_form, heldout_error
from galinear.compress.methods import catalogue as methods
from galinear.nn import KroneckerSumLinear, MixedBlockHadamardLinear, MonarchLinear  # noqa: E402


def _rows(n=300, d_in=12, d_out=8, seed=0, bias=False, noise=0.3):
    """Correlated inputs x and noisy targets y of a random linear map (+ intercept)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d_in)) @ rng.normal(size=(d_in, d_in)) + rng.normal(size=d_in)
    y = x @ rng.normal(size=(d_out, d_in)).T + noise * rng.normal(size=(n, d_out))
    if bias:
        y = y + rng.normal(size=d_out)
    return x, y


def _regression(x, y, bias, chunk=64):
    """Moments of explicit (x, y) rows, streamed in chunks: targets y = I y."""
    acc = closed_form.SecondMoments(x.shape[1], y.shape[1])
    for i in range(0, len(x), chunk):
        acc.update(torch.as_tensor(x[i:i + chunk]), torch.as_tensor(y[i:i + chunk]))
    d_out = y.shape[1]
    return acc.regression(torch.eye(d_out, dtype=torch.float64),
                          torch.zeros(d_out, dtype=torch.float64) if bias else None)


def _centred(x, y, bias):
    return (x - x.mean(0), y - y.mean(0)) if bias else (x, y)


# ------------------------------------------------------------------------------ Hadamard-mixed blocks

def _class_lstsq(x, y, module):
    """Independent optimum over the class y ~ Q D x: one lstsq on the unknown block entries, with
    the design written from the definition (no use of the block structure of the normal equations)."""
    q = np.kron(scipy.linalg.hadamard(module.blocks) / np.sqrt(module.blocks), np.eye(module.block_out))
    d_in, bi, bo = module.in_features, module.block_in, module.block_out
    unknowns = [(g, a, t) for g in range(module.blocks) for a in range(bo) for t in range(bi) if g * bi + t < d_in]
    design = np.zeros((len(x) * y.shape[1], len(unknowns)))
    for col, (g, a, t) in enumerate(unknowns):
        # entry D[g bo + a, g bi + t] contributes Q[i, g bo + a] x[g bi + t] to output i
        design[:, col] = np.outer(x[:, g * bi + t], q[:, g * bo + a]).reshape(-1)
    coef = np.linalg.lstsq(design, y.reshape(-1), rcond=None)[0]
    d = np.zeros((module.out_features, d_in))
    for value, (g, a, t) in zip(coef, unknowns):
        d[g * bo + a, g * bi + t] = value
    return q @ d


@pytest.mark.parametrize("d_in, d_out, blocks", [(12, 8, 4), (10, 8, 2), (7, 4, 4), (16, 16, 8)])
@pytest.mark.parametrize("bias", [False, True])
def test_mixed_block_fit_is_the_least_squares_optimum_of_the_class(d_in, d_out, blocks, bias):
    x, y = _rows(d_in=d_in, d_out=d_out, seed=d_in + blocks, bias=bias)
    module = MixedBlockHadamardLinear(d_in, d_out, blocks=blocks, bias=bias, dtype=torch.float64)
    stats = closed_form.fit_module(module, _regression(x, y, bias))
    xc, yc = _centred(x, y, bias)
    expected = _class_lstsq(xc, yc, module)
    got = module.dense_weight().detach().numpy()
    assert np.allclose(got, expected, atol=1e-8 * np.abs(expected).max())
    if bias:
        assert np.allclose(module.bias.detach().numpy(), y.mean(0) - expected @ x.mean(0), atol=1e-8)
    tokenwise = heldout_error.mse(module, torch.as_tensor(x), torch.as_tensor(y))
    assert stats["train_mse"] == pytest.approx(tokenwise, rel=1e-8)
    # and no block-diagonal map without the mix does better than the mixed optimum's own blocks
    turned = closed_form.mixed_block_fit(_regression(x, y, bias), module.mixing_matrix(dtype=torch.float64).numpy(),
                                         blocks, module.block_in, module.block_out)[0]
    assert np.allclose(turned, module.first.detach().numpy(), atol=1e-10)


# ------------------------------------------------------------------------------ Kronecker sum, Monarch

def _ols_rows(x, y, bias):
    xc, yc = _centred(x, y, bias)
    return np.linalg.lstsq(xc, yc, rcond=None)[0].T


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("terms", [1, 3])
def test_kronecker_fit_from_moments_equals_the_fit_from_raw_rows(terms, bias):
    x, y = _rows(d_in=12, d_out=8, seed=terms, bias=bias)
    module = KroneckerSumLinear(12, 8, terms=terms, factors=((2, 3), (4, 4)), bias=bias, dtype=torch.float64)
    stats = closed_form.fit_module(module, _regression(x, y, bias))
    w = _ols_rows(x, y, bias)
    # from raw rows: lstsq, then rearrangement by index loops and numpy's SVD
    r = np.zeros((6, 16))
    for i1 in range(2):
        for i2 in range(4):
            for j1 in range(3):
                for j2 in range(4):
                    r[i1 * 3 + j1, i2 * 4 + j2] = w[i1 * 4 + i2, j1 * 4 + j2]
    u, s, vt = np.linalg.svd(r)
    expected = sum(s[k] * np.kron(u[:, k].reshape(2, 3), vt[k].reshape(4, 4)) for k in range(terms))
    assert np.allclose(module.dense_weight().detach().numpy(), expected, atol=1e-8 * np.abs(expected).max())
    if bias:
        assert np.allclose(module.bias.detach().numpy(), y.mean(0) - expected @ x.mean(0), atol=1e-8)
    assert stats["train_mse"] == pytest.approx(heldout_error.mse(module, torch.as_tensor(x), torch.as_tensor(y)),
                                               rel=1e-8)


def test_monarch_fit_from_moments_equals_the_projection_of_the_row_least_squares():
    x, y = _rows(d_in=12, d_out=8, seed=11)
    module = MonarchLinear(12, 8, blocks=4, dtype=torch.float64)
    closed_form.fit_module(module, _regression(x, y, False))
    w = _ols_rows(x, y, False)
    expected = np.zeros_like(w)  # per sub-block S_ag[h, t] = W[h q + a, g p + t]: its best rank 1
    for a in range(2):
        for g in range(4):
            rows, cols = [h * 2 + a for h in range(4)], [g * 3 + t for t in range(3)]
            u, s, vt = np.linalg.svd(w[np.ix_(rows, cols)])
            expected[np.ix_(rows, cols)] = s[0] * np.outer(u[:, 0], vt[0])
    assert np.allclose(module.dense_weight().detach().numpy(), expected, atol=1e-8 * np.abs(expected).max())


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), name=st.sampled_from(["kron-cf", "monarch-cf", "bhh-cf", "lr-cf"]))
def test_a_representable_map_is_fitted_exactly_from_moments(seed, name):
    """Targets produced by a member of the class (no noise): the moment fit reproduces it."""
    torch.manual_seed(seed)
    spec = methods.MethodSpec(name=name)
    truth = methods.build_module(spec, 16, 8).double()
    x = torch.randn(200, 16, dtype=torch.float64) @ torch.randn(16, 16, dtype=torch.float64)
    with torch.no_grad():
        y = truth(x)
    module = methods.build_module(spec, 16, 8).double()
    closed_form.fit_module(module, _regression(x.numpy(), y.numpy(), False))
    expected = truth.dense_weight().detach().numpy()
    assert np.allclose(module.dense_weight().detach().numpy(), expected, atol=1e-7 * np.abs(expected).max())


# ------------------------------------------------------------------------------ methods and budgets

@pytest.mark.parametrize("shape", [(576, 576), (576, 192), (32, 16), (20, 12)])
def test_budget_formulas_equal_the_modules_parameter_counts(shape):
    d_in, d_out = shape
    for name in ("lr", "bh1", "kron", "monarch", "bhh"):
        values = budgets.settings(name, d_in, d_out)
        for value in sorted({values[0], values[len(values) // 2], values[-1]}):
            spec = methods.MethodSpec(name=name, **{methods.KNOBS[name]: value})
            for bias in (False, True):
                module = methods.build_module(spec, d_in, d_out, bias=bias)
                assert budgets.parameters(name, value, d_in, d_out, bias) == methods.count_parameters(module), \
                    (name, value, bias)


@pytest.mark.parametrize("shape, hidden, chunk", [((576, 192), 64, None), ((576, 576), 2048, None), ((32, 16), 64, None),
                                                 ((20, 12), 128, None), ((576, 192), 512, 64), ((576, 576), 512, 128),
                                                 ((32, 16), 64, 4), ((20, 12), 128, 8)])
def test_budget_formula_of_the_rotor_network_and_its_control(shape, hidden, chunk):
    for name in ("rotor", "givens"):
        for bias in (False, True):
            module = methods.build_module(methods.MethodSpec(name=name, hidden=hidden, chunk=chunk), *shape, bias=bias)
            assert budgets.parameters(name, chunk, *shape, bias, hidden=hidden) == methods.count_parameters(module)


def test_smaller_chunks_grow_the_rotor_network_at_its_width():
    """The chunk knob: the gadgets really use it, and each halving adds parameters."""
    counts = []
    for chunk in budgets.settings("rotor", 576, 192):
        module = methods.build_module(methods.MethodSpec(name="rotor", chunk=chunk), 576, 192)
        assert module.hidden == 512
        assert {g.chunk_size for g in module.modules() if type(g).__name__ == "RotorLinear"} == \
            {min(chunk, 128), min(chunk, 512)}
        counts.append(methods.count_parameters(module))
    assert counts == sorted(counts, reverse=True) and len(set(counts)) == len(counts)
    natural = methods.build_module(methods.MethodSpec(name="rotor"), 576, 192)
    assert methods.count_parameters(natural) == counts[-1] == budgets.parameters("rotor", None, 576, 192)
    tags = {methods.MethodSpec(name="rotor", chunk=c).tag() for c in (None, 64, 128)}
    assert tags == {"rotor-h512-e1-lr0.05", "rotor-h512-c64-e1-lr0.05", "rotor-h512-c128-e1-lr0.05"}
    for bad in (2, 48, 0):
        with pytest.raises(ValueError, match="chunk must be"):
            methods.MethodSpec(name="rotor", chunk=bad)
    with pytest.raises(ValueError, match="drop chunk"):
        methods.MethodSpec(name="kron", chunk=64)


def test_closest_setting_is_the_brute_force_argmin():
    for name in methods.KNOBS:
        for budget in (50, 400, 3000):
            got = budgets.closest_setting(name, budget, 32, 16)
            best = min(abs(budgets.parameters(name, v, 32, 16) - budget) for v in budgets.settings(name, 32, 16))
            assert abs(got.parameters - budget) == best
            assert got.parameters == budgets.parameters(name, got.value, 32, 16)


def test_matched_settings_for_smollm2_qkv():
    dense = 576 * 576 + 2 * 576 * 192
    for fraction in budgets.FRACTIONS:
        matched = budgets.matched_settings(fraction)
        for name in ("lr", "kron", "bh1"):
            total = sum(s.parameters for s in matched[name].values())
            assert abs(total / (fraction * dense) - 1) < 0.1, (name, fraction, total)
    two = budgets.matched_settings(0.02)
    assert two["lr"]["q_proj"].value == 6 and two["kron"]["q_proj"].value == 6
    assert {s.value for s in two["monarch"].values()} == {24}  # Monarch cannot go below 2 d^1.5
    eight = budgets.matched_settings(0.08)["rotor"]
    assert eight["q_proj"].relative < 0 and eight["q_proj"].value == 64  # per projection, not up to 8 % at width 512
    assert {s.knob for s in eight.values()} == {"chunk"}
    with pytest.raises(ValueError, match="fraction"):
        budgets.matched_settings(2.0)
    with pytest.raises(ValueError, match="no size knob"):
        budgets.closest_setting("dense", 100, 8, 8)


def test_flops_per_token_counts_the_kronecker_products():
    (m1, n1), (m2, n2) = budgets.kronecker_factors(576, 576)
    assert budgets.flops_per_token("kron", 1, 576, 576) == 24 ** 3 * 2 == n1 * n2 * m2 + m1 * n1 * m2
    assert budgets.flops_per_token("lr", 4, 576, 192) == 4 * 768
    assert budgets.flops_per_token("bhh", 64, 576, 192) == 192 * 9 + 192 * 6


def test_new_method_specs_build_their_modules_and_have_distinct_tags():
    specs = [methods.MethodSpec(name="lr", rank=6), methods.MethodSpec(name="lr", rank=7),
             methods.MethodSpec(name="kron", terms=6), methods.MethodSpec(name="kron-cf", terms=6),
             methods.MethodSpec(name="monarch", blocks=8), methods.MethodSpec(name="bhh-cf", blocks=16),
             methods.MethodSpec(name="givens", hidden=64), methods.MethodSpec(name="givens", hidden=128)]
    assert len({s.tag() for s in specs}) == len(specs)
    assert methods.build_module(specs[0], 32, 16).rank == 6
    assert methods.build_module(specs[2], 32, 16).terms == 6
    assert methods.build_module(specs[4], 32, 16).blocks == 8
    assert methods.build_module(specs[6], 32, 16).hidden == 64
    assert methods.build_module(methods.MethodSpec(name="monarch"), 576, 192).blocks == 24
    assert methods.build_module(methods.MethodSpec(name="bhh"), 576, 192).blocks == 64
    assert methods.display_name("kron-cf") == "Kron*" and methods.CLOSED_FORM["bhh"] == "bhh-cf"
    with pytest.raises(ValueError, match="terms must be a positive integer"):
        methods.MethodSpec(name="kron", terms=0)


@pytest.mark.parametrize("fields, message", [
    (dict(name="lr1-cf", rank=10**9), "rank sets the size of lr and lr-cf; method lr1-cf has no rank"),
    (dict(name="lr", terms=3), "terms sets the size of kron and kron-cf; method lr has no terms"),
    (dict(name="rotor", blocks=4), "blocks sets the size of bh1 and bh1-cf, monarch and monarch-cf, bhh and bhh-cf"),
    (dict(name="lr1", epochs="nan"), "epochs must be a finite number > 0, got 'nan'"),
    (dict(name="lr1", epochs=float("inf")), "epochs must be a finite number > 0, got inf"),
    (dict(name="lr1", lr="0.1"), "lr must be a finite number > 0 or None, got '0.1'"),
    (dict(name="lr1", batch_size="256"), "batch_size must be an integer >= 1, got '256'"),
    (dict(name="rotor", max_steps=1.5), "max_steps must be a positive integer or None, got 1.5"),
])
def test_method_records_out_of_range_are_refused_naming_the_field(fields, message):
    """What a kept folder records is checked as the command line checks it (a rank on a fixed-rank
    method, a number written as a string)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        methods.MethodSpec(**fields)
    with pytest.raises(ValueError, match=r"rank 40 is more than min\(d_in, d_out\) = 32"):
        methods.build_module(methods.MethodSpec(name="lr", rank=40), 32, 64)


def test_study_with_the_structured_baselines(tmp_path, tiny):
    pytest.importorskip("transformers")
    from galinear.compress import Study
    from galinear.testing.compression import tiny_config
    from galinear.testing.models import TEXTS

    config = tiny_config(tmp_path, methods=("kron-cf", "monarch-cf", "bhh-cf", "lr-cf"), layer_sets=((1,),),
                         datasets=("a",), epochs=0.5)
    entries = Study(config, tiny, texts=TEXTS).run()["entries"]
    rows = {e["method"]: e for e in entries.values() if e["method"] != "original"}
    assert set(rows) == {"kron-cf", "monarch-cf", "bhh-cf", "lr-cf"}
    assert all(np.isfinite(e["log_ppl"]) for e in rows.values())


def test_the_study_fit_loop_trains_the_orthogonal_control():
    """methods.build_module('givens') through the study's Adam loop (galinear.compress.fitting.projection)."""
    from galinear.compress.fitting import projection

    torch.manual_seed(0)
    module = methods.build_module(methods.MethodSpec(name="givens", hidden=16), 32, 16)
    x = torch.randn(512, 32)
    weight = torch.randn(16, 32) / 6
    before = heldout_error.mse(module, x, x @ weight.T)
    stats = projection.fit_projection(module, x, x, weight, lr=methods.MethodSpec("givens").learning_rate, epochs=2,
                                      batch_size=64)
    assert stats["steps"] == 16 and heldout_error.mse(module, x, x @ weight.T) < 0.9 * before


def test_a_budget_spec_sets_each_projections_knob():
    for name, q_value, kv_value in (("lr", 6, 3), ("kron-cf", 6, 3), ("bh1", 48, 48), ("bhh", 64, 64)):
        spec = methods.MethodSpec(name=name, budget=0.02)
        assert spec.tag().startswith(f"{name}-p0.02")
        knob = methods.KNOBS[methods.base_name(name)]
        q, k = methods.build_module(spec, 576, 576), methods.build_module(spec, 576, 192)
        assert (getattr(q, knob), getattr(k, knob)) == (q_value, kv_value)
        for module, (d_in, d_out) in ((q, (576, 576)), (k, (576, 192))):
            setting = budgets.closest_setting(name, round(0.02 * d_in * d_out), d_in, d_out)
            assert methods.count_parameters(module) == setting.parameters
    for name in ("givens", "rotor"):
        for budget, hidden in ((0.001, 512), (0.5, 64)):
            spec = methods.MethodSpec(name=name, budget=budget, hidden=hidden)
            assert spec.tag().startswith(f"{name}-p{budget:g}-h{hidden}-")
            module = methods.build_module(spec, 32, 16)
            setting = budgets.closest_setting(name, max(1, round(budget * 32 * 16)), 32, 16, hidden=hidden)
            assert module.hidden == hidden and methods.count_parameters(module) == setting.parameters
    q = methods.build_module(methods.MethodSpec(name="rotor", budget=0.02), 576, 576)
    assert {g.chunk_size for g in q.modules() if type(g).__name__ == "RotorLinear"} == {128}
    with pytest.raises(ValueError, match="no size knob"):
        methods.MethodSpec(name="dense", budget=0.02)
    with pytest.raises(ValueError, match="fraction in"):
        methods.MethodSpec(name="lr", budget=2)


def test_default_sizes_fit_awkward_widths():
    for name in ("kron", "monarch", "bhh", "lr", "givens"):
        module = methods.build_module(methods.MethodSpec(name=name, hidden=16), 7, 5)
        assert module(torch.randn(2, 7)).shape == (2, 5)
