"""A compressed model kept in a folder: exact round trip, identity checks, no silent random weights."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from galinear.compress import Study, export_dense, load  # noqa: E402
from galinear.lm import models  # noqa: E402
from galinear.lm.perplexity import heldout_log_perplexity  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def saved_study(tmp_path_factory):
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import CharTokenizer

    root = tmp_path_factory.mktemp("saved")
    config = tiny_config(root / "run", methods=("rotor", "lr1-cf", "bh1-cf"), hidden=16, layer_sets=((0, 2),),
                         datasets=("a",), save_dir=str(root / "keep"), epochs=1.0)
    study = Study(config, LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama"), texts=TEXTS)
    entries = study.run()["entries"]
    return root, study, entries


def _entry(entries, method):
    return [e for e in entries.values() if e["method"] == method][0]


@pytest.mark.parametrize("method", ["rotor", "lr1-cf", "bh1-cf"])
def test_round_trip_is_exact(saved_study, method):
    root, study, entries = saved_study
    index = json.loads((root / "keep" / "index.json").read_text())
    folder = [n for n in index["models"] if n.startswith(method + "-") or n.startswith(method.split("-")[0] + "-h")][0]
    if method == "rotor":
        folder = [n for n in index["models"] if n.startswith("rotor")][0]
    path = root / "keep" / folder
    assert sorted(os.listdir(path)) == ["README.md", "config.json", "galinear_compressed.json", "replacements.safetensors"]
    fresh = load(str(path), tiny_llama())
    expected = {"rotor": "RotorNetwork", "lr1-cf": "LowRankLinear", "bh1-cf": "BlockHadamardLinear"}[method]
    assert type(models.projection(fresh, 2, "v_proj")).__name__ == expected
    assert heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"] == _entry(entries, method)["log_ppl"]
    config = json.loads((path / "galinear_compressed.json").read_text())
    assert config["model"]["name"] == "tiny-llama" and config["layers"] == [0, 2]
    assert {m["class"] for m in config["modules"]} == {expected}


def test_rotor_buffers_are_saved(saved_study):
    from safetensors.torch import load_file

    root, _, _ = saved_study
    folder = [n for n in os.listdir(root / "keep") if n.startswith("rotor")][0]
    tensors = load_file(str(root / "keep" / folder / "replacements.safetensors"))
    module = models.projection(load(str(root / "keep" / folder), tiny_llama()), 0, "q_proj")
    params = {name for name, _ in module.named_parameters()}
    buffers = [name for name in module.state_dict() if name not in params]  # persistent buffers
    assert "input_permutation" in buffers and all(f"0.q_proj.{b}" in tensors for b in buffers)
    # the permutations are stored in int16 (every index fits) and come back as the module's int64
    for b in ("input_permutation", "hidden_permutations"):
        stored, loaded = tensors[f"0.q_proj.{b}"], module.state_dict()[b]
        assert stored.dtype == torch.int16 and loaded.dtype == torch.int64
        assert torch.equal(stored.to(torch.int64), loaded)


def _rotor_copy(saved_study, tmp_path):
    import shutil

    root, _, _ = saved_study
    source = root / "keep" / [n for n in os.listdir(root / "keep") if n.startswith("rotor")][0]
    shutil.copytree(source, tmp_path / "copy")
    return tmp_path / "copy"


def _rewrite(folder, change):
    """Apply ``change`` to every stored tensor and record the new dtypes and checksums, as save would."""
    from safetensors.torch import load_file, save_file

    from galinear.compress.storage.folder_format import describe_tensors

    path = folder / "replacements.safetensors"
    tensors = {k: change(k, v) for k, v in load_file(str(path)).items()}
    save_file(tensors, str(path), metadata={"format": "galinear-compressed-v3"})
    config = json.loads((folder / "galinear_compressed.json").read_text())
    for entry in config["modules"]:
        prefix = f"{entry['layer']}.{entry['projection']}."
        own = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        entry["tensors"] = describe_tensors(own)
    (folder / "galinear_compressed.json").write_text(json.dumps(config))


def test_int64_permutations_of_earlier_folders_still_load(saved_study, tmp_path):
    root, study, entries = saved_study
    copy = _rotor_copy(saved_study, tmp_path)
    _rewrite(copy, lambda k, v: v.to(torch.int64) if not v.is_floating_point() else v)
    fresh = load(str(copy), tiny_llama())
    assert heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"] == _entry(entries, "rotor")["log_ppl"]


def test_a_narrow_permutation_that_is_no_permutation_is_refused(saved_study, tmp_path):
    copy = _rotor_copy(saved_study, tmp_path)
    _rewrite(copy, lambda k, v: torch.zeros_like(v) if k.endswith("input_permutation") else v)
    with pytest.raises(ValueError, match="permutation"):
        load(str(copy), tiny_llama())


def test_an_integer_tensor_in_place_of_a_float_one_is_refused(saved_study, tmp_path):
    copy = _rotor_copy(saved_study, tmp_path)
    _rewrite(copy, lambda k, v: v.to(torch.int16) if k.endswith("activation.weight") else v)
    with pytest.raises(ValueError, match="activation.weight is torch.int16"):
        load(str(copy), tiny_llama())


def test_wrong_model_is_refused(saved_study):
    from transformers import LlamaConfig, LlamaForCausalLM

    root, _, _ = saved_study
    folder = str(root / "keep" / [n for n in os.listdir(root / "keep") if n.startswith("lr1-cf")][0])
    wider = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                         num_attention_heads=4, num_key_value_heads=2))
    with pytest.raises(ValueError, match="hidden_size = 32"):
        load(folder, wider)
    with pytest.raises(ValueError, match="other weights"):
        load(folder, tiny_llama(seed=5))  # same shapes, another model
    with pytest.raises(ValueError, match="holds 3 compressed models"):
        load(str(root / "keep"), tiny_llama())
    with pytest.raises(ValueError, match="does not say where its original model comes from"):
        load(folder)  # the test study was given its model: no source to reload from


def test_a_damaged_tensor_file_is_named(saved_study, tmp_path):
    import shutil

    root, _, _ = saved_study
    source = root / "keep" / [n for n in os.listdir(root / "keep") if n.startswith("lr1-cf")][0]
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    tensors = copy / "replacements.safetensors"
    tensors.write_bytes(tensors.read_bytes()[:20])
    with pytest.raises(ValueError, match="replacements.safetensors: damaged or truncated.*rerun the `galinear compress`"):
        load(str(copy), tiny_llama())


def test_from_pretrained_never_yields_random_weights(saved_study):
    from transformers import AutoModelForCausalLM

    root, _, _ = saved_study
    for name in os.listdir(root / "keep"):
        if not (root / "keep" / name).is_dir():  # index.json, study.json
            continue
        with pytest.raises((OSError, ValueError)):
            AutoModelForCausalLM.from_pretrained(str(root / "keep" / name))


def test_export_dense_bakes_linear_replacements(saved_study, tmp_path):
    from transformers import AutoModelForCausalLM

    root, study, entries = saved_study
    folder = str(root / "keep" / [n for n in os.listdir(root / "keep") if n.startswith("bh1-cf")][0])
    model = load(folder, tiny_llama())
    before = heldout_log_perplexity(model, study.windows["a"])["log_ppl"]
    export_dense(model)
    assert all(type(models.projection(model, layer, p)) is torch.nn.Linear for layer in (0, 2) for p in models.PROJECTIONS)
    assert heldout_log_perplexity(model, study.windows["a"])["log_ppl"] == pytest.approx(before, abs=1e-5)
    model.save_pretrained(tmp_path / "plain")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "plain")
    assert torch.equal(models.projection(again, 2, "k_proj").weight, models.projection(model, 2, "k_proj").weight)
    rotor = load(str(root / "keep" / [n for n in os.listdir(root / "keep") if n.startswith("rotor")][0]), tiny_llama())
    with pytest.raises(ValueError, match="nonlinear"):
        export_dense(rotor)


def test_save_pretrained_of_a_loaded_compressed_model_refuses(saved_study, tmp_path):
    """Plain save_pretrained would drop the replacements (from_pretrained then builds random q/k/v)."""
    root, _, _ = saved_study
    rotor = load(str(root / "keep" / [n for n in os.listdir(root / "keep") if n.startswith("rotor")][0]), tiny_llama())
    with pytest.raises(ValueError, match="galinear.compress.load"):
        rotor.save_pretrained(tmp_path / "dropped")
    assert not (tmp_path / "dropped").exists()


def test_load_from_the_recorded_source(tmp_path):
    """A model saved as a local folder is reloaded from it when no model is passed."""
    from galinear.compress.fitting import closed_form
    from galinear.compress.methods import catalogue as methods
    from galinear.compress.storage import folder_format
    from galinear.nn import LowRankLinear

    source = tmp_path / "model"
    model = tiny_llama(seed=2)
    model.save_pretrained(source)
    module = LowRankLinear(32, 16, rank=1)
    replacements = {(1, "k_proj"): module}
    spec = methods.MethodSpec("lr1-cf")
    folder_format.save(str(tmp_path / "kept"), model, replacements, spec, source=str(source), name="model")
    from unittest import mock

    with mock.patch.object(models, "load_model", lambda s, g=None: models.LoadedModel(
            transformers.AutoModelForCausalLM.from_pretrained(s), None, "model")):
        back = load(str(tmp_path / "kept"))
    got = models.projection(back, 1, "k_proj")
    assert torch.equal(got.up, module.up) and torch.equal(got.down, module.down)
    assert np.isfinite(closed_form.module_matrix(got)).all()


def test_family_with_q_norms_and_wide_q(tmp_path):
    """Qwen3-style attention: q/k norms after the projections and q wider than the hidden size."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from galinear.lm.models import LoadedModel
    from galinear.testing.models import CharTokenizer

    def qwen3(seed):
        torch.manual_seed(seed)
        config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128)
        model = Qwen3ForCausalLM(config).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        return model

    assert models.projection(qwen3(0), 1, "q_proj").out_features == 64
    config = tiny_config(tmp_path / "run", methods=("lr1-cf", "bh1-cf", "rotor"), hidden=16, layer_sets=((1,),),
                         datasets=("a",), save_dir=str(tmp_path / "keep"), epochs=0.5)
    study = Study(config, LoadedModel(qwen3(0), CharTokenizer(), "tiny-qwen3"), texts=TEXTS)
    entries = study.run()["entries"]
    for name in os.listdir(tmp_path / "keep"):
        if not (tmp_path / "keep" / name).is_dir():  # index.json, study.json
            continue
        method = [m for m in ("lr1-cf", "bh1-cf", "rotor") if name.startswith(m)][0]
        fresh = load(str(tmp_path / "keep" / name), qwen3(0))
        assert heldout_log_perplexity(fresh, study.windows["a"])["log_ppl"] == _entry(entries, method)["log_ppl"]


def test_encoders_are_refused_with_a_clear_message():
    from transformers import BertConfig, BertForMaskedLM

    bert = BertForMaskedLM(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64))
    with pytest.raises(ValueError, match="only causal LMs"):
        models.check_model(bert, [0])


# ---------------------------------------------------------------------- the single-file format v1 (read only)
def _wide_llama(hidden: int = 48, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=64, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=2)).eval()


def _rotor_file(path, model, with_identity: bool, pickled: bool = False, projections=("q_proj", "k_proj")):
    """A v1 file with rotor networks for layer 1's ``projections`` of ``model``."""
    from galinear.compress.methods import catalogue as methods
    from galinear.testing.compression import write_v1_file

    spec = methods.MethodSpec("rotor", hidden=16)
    torch.manual_seed(3)
    replacements = {(1, p): methods.build_module(spec, models.projection(model, 1, p).in_features,
                                                 models.projection(model, 1, p).out_features)
                    for p in projections}
    write_v1_file(path, replacements, spec, "wide-llama", model=model if with_identity else None, pickled=pickled)
    return replacements


@pytest.mark.parametrize("pickled", [False, True], ids=["state-file", "torch-save"])
def test_a_v1_file_loads_through_the_converter_as_its_folder_does(tmp_path, pickled):
    """A v1 file (written by the fixture from that format's layout) and the v3 folder of the same
    replacements install the same modules: the same tensors, bit for bit, and the same logits."""
    from galinear.compress import MethodSpec, load, load_compressed, save
    from galinear.compress.storage import folder_format

    source = tiny_llama(seed=0)
    replacements = _rotor_file(tmp_path / "m.pt", source, with_identity=True, pickled=pickled)
    plain = torch.nn.Linear(32, 32)  # an o_proj refit: a plain matrix in a v1 file
    replacements[(1, "o_proj")] = plain
    from galinear.testing.compression import write_v1_file

    write_v1_file(tmp_path / "m.pt", replacements, MethodSpec("rotor", hidden=16), "wide-llama", model=source,
                  pickled=pickled)
    folder = save(str(tmp_path / "folder"), source, replacements, MethodSpec("rotor", hidden=16), name="wide-llama")
    config, tensors = folder_format.read(str(tmp_path / "m.pt"))
    assert config["format"] == folder_format.FORMAT and set(tensors) == {
        f"1.{p}.{k}" for p, m in (("q_proj", replacements[(1, "q_proj")]), ("k_proj", replacements[(1, "k_proj")]),
                                  ("o_proj", plain)) for k in m.state_dict()}
    from_file, from_folder = tiny_llama(seed=0), tiny_llama(seed=0)
    installed = load_compressed(from_file, str(tmp_path / "m.pt"))
    load(folder, from_folder)
    assert type(installed[(1, "o_proj")]) is torch.nn.Linear and type(installed[(1, "q_proj")]).__name__ == "RotorNetwork"
    for key in replacements:
        a, b = models.projection(from_file, *key).state_dict(), models.projection(from_folder, *key).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k].to(a[k].dtype)) for k in a), key
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        reference = source(input_ids=ids).logits
        assert torch.equal(from_file(input_ids=ids).logits, from_folder(input_ids=ids).logits)
        assert not torch.allclose(from_file(input_ids=ids).logits, reference)  # the replacements are in use
    with pytest.raises(ValueError, match="other weights"):  # the v1 identity is checked as a folder's is
        load(str(tmp_path / "m.pt"), tiny_llama(seed=5))


def test_the_converter_refuses_what_it_cannot_check(tmp_path):
    """A v1 file without checksums, a tensor changed after it was written, a v2 folder: refused by name."""
    from galinear import _io
    from galinear.compress import load_compressed
    from galinear.compress.storage import folder_format

    _rotor_file(tmp_path / "m.pt", tiny_llama(), with_identity=True)
    payload = _io.load_state(tmp_path / "m.pt")
    changed = dict(payload, modules={k: dict(v, state={n: t + 1 if t.is_floating_point() else t
                                                       for n, t in v["state"].items()})
                                     for k, v in payload["modules"].items()})
    _io.save_state(tmp_path / "changed.pt", changed)
    with pytest.raises(ValueError, match="does not match its recorded SHA-256"):
        load_compressed(tiny_llama(), str(tmp_path / "changed.pt"))
    _io.save_state(tmp_path / "bare.pt", {k: v for k, v in payload.items() if k != "checksums"})
    with pytest.raises(ValueError, match="bare.pt: records no checksums"):
        load_compressed(tiny_llama(), str(tmp_path / "bare.pt"))
    with pytest.raises(ValueError, match="written by an older galinear .*no checksum"):
        folder_format.as_current({"format": "galinear-compressed-v2"}, str(tmp_path / "old" / folder_format.CONFIG))
    with pytest.raises(ValueError, match="not a compressed model written by galinear"):
        folder_format.as_current({"format": "something"}, str(tmp_path / "m.pt"))
    with pytest.raises(FileNotFoundError, match="no such compressed model"):
        load_compressed(tiny_llama(), str(tmp_path / "missing.pt"))


@pytest.mark.parametrize("with_identity", [False, True])
def test_load_compressed_refuses_a_file_for_another_model(tmp_path, with_identity):
    """A 48-wide model's rotor networks put into a 32-wide one: refused on load, nothing installed."""
    from galinear.compress import load_compressed

    _rotor_file(tmp_path / "wide.pt", _wide_llama(), with_identity)
    model = tiny_llama()
    before = {p: models.projection(model, 1, p) for p in models.PROJECTIONS}
    match = "hidden_size = 48.*hidden_size = 32" if with_identity else "layer 1 q_proj is 48 -> 48 there, 32 -> 32"
    with pytest.raises(ValueError, match=match):
        load_compressed(model, str(tmp_path / "wide.pt"))
    assert all(models.projection(model, 1, p) is m for p, m in before.items())  # untouched
    assert "save_pretrained" not in vars(model)


def test_load_compressed_checks_the_weight_fingerprint(tmp_path):
    from galinear.compress import load_compressed

    saved = _rotor_file(tmp_path / "same.pt", tiny_llama(seed=0), with_identity=True)
    with pytest.raises(ValueError, match="other weights"):
        load_compressed(tiny_llama(seed=5), str(tmp_path / "same.pt"))
    other = tiny_llama(seed=5)
    load_compressed(other, str(tmp_path / "same.pt"), check_weights=False)  # the caller knows better
    model = tiny_llama(seed=0)
    installed = load_compressed(model, str(tmp_path / "same.pt"))
    for key, module in saved.items():
        got = models.projection(model, *key)
        assert got is installed[key] and type(got).__name__ == "RotorNetwork"
        for (name, a), (_, b) in zip(module.state_dict().items(), got.state_dict().items()):
            assert torch.equal(a, b), name
        x = torch.randn(5, 32)
        assert torch.equal(module.eval()(x), got(x))


def test_load_compressed_guards_save_pretrained(tmp_path):
    """As for galinear.compress.load: HF's save_pretrained would drop the rotor modules, so it refuses."""
    from galinear.compress import load_compressed

    _rotor_file(tmp_path / "m.pt", tiny_llama(), with_identity=True)
    model = tiny_llama()
    load_compressed(model, str(tmp_path / "m.pt"))
    with pytest.raises(ValueError, match="galinear replacements.*layer 1 q_proj \\(RotorNetwork\\)"):
        model.save_pretrained(tmp_path / "dropped")
    assert not (tmp_path / "dropped").exists()


def test_export_dense_bakes_rotor_linear(tmp_path):
    """rotorlin-m (one RotorLinear gadget per projection) is linear: baked into nn.Linear it gives the
    same logits, and a plain save_pretrained / from_pretrained keeps them."""
    from transformers import AutoModelForCausalLM

    from galinear.compress.methods import catalogue as methods
    from galinear.compress.storage import folder_format
    from galinear.nn import RotorLinear

    spec = methods.MethodSpec("rotorlin-m")
    model = tiny_llama()
    torch.manual_seed(11)
    replacements = {}
    for layer in (0, 2):
        for p in models.PROJECTIONS:
            orig = models.projection(model, layer, p)
            module = methods.build_module(spec, orig.in_features, orig.out_features)
            with torch.no_grad():  # away from the initialisation, so the rotors are not near the identity
                for param in module.parameters():
                    param.add_(0.3 * torch.randn_like(param))
            replacements[(layer, p)] = module
    folder = folder_format.save(str(tmp_path / "kept"), model, replacements, spec, name="tiny-llama")
    compressed = load(folder, tiny_llama())
    assert isinstance(models.projection(compressed, 2, "v_proj"), RotorLinear)
    ids = torch.as_tensor(np.random.default_rng(0).integers(0, 64, (2, 24)))
    with torch.no_grad():
        before = compressed(input_ids=ids).logits
        original = tiny_llama()(input_ids=ids).logits
    assert (before - original).abs().max() > 1e-2  # the replacements change the model
    export_dense(compressed)
    assert all(type(models.projection(compressed, layer, p)) is torch.nn.Linear
               for layer in (0, 2) for p in models.PROJECTIONS)
    with torch.no_grad():
        after = compressed(input_ids=ids).logits
    torch.testing.assert_close(after, before, atol=1e-4, rtol=1e-4)  # float32 tolerance
    compressed.save_pretrained(tmp_path / "plain")  # the guard is lifted: only nn.Linear left
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "plain").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(input_ids=ids).logits, after, atol=0, rtol=0)


def test_a_folder_of_the_zero_baseline_loads(tmp_path):
    """Every method a study keeps loads back, the zero baseline (a module without tensors) included."""
    from galinear.compress import MethodSpec, build_module, load, save

    model = tiny_llama()
    folder = save(str(tmp_path / "zero"), model, {(1, "q_proj"): build_module(MethodSpec("zero"), 32, 32)},
                  MethodSpec("zero"), name="tiny")
    loaded = load(folder, tiny_llama())
    out = models.projection(loaded, 1, "q_proj")(torch.randn(3, 32))
    assert type(models.projection(loaded, 1, "q_proj")).__name__ == "ZeroProjection" and not out.any()
