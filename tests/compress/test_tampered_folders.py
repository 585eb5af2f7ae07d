"""A kept (`--save`) folder is data from anywhere: every test starts from a folder tampered with
as a forger or a damaged disk would, then loads (and runs) it as a user would. Each is refused
before anything is installed, with one line naming what is wrong; none hangs, fills memory or
crashes the process."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from galinear.lm import models as _models
from galinear.testing.payloads import truncate_file

ROOT = Path(__file__).resolve().parents[2]


def _rotor_folder(root, model=None, name="kept"):
    """A folder with rotor networks for layer 1's q, k and v of the tiny Llama (hidden width 16)."""
    from galinear.compress import MethodSpec, build_module, save
    from galinear.testing.models import tiny_llama

    model = tiny_llama() if model is None else model
    spec = MethodSpec("rotor", hidden=16)
    torch.manual_seed(3)
    replacements = {(1, p): build_module(spec, _models.projection(model, 1, p).in_features,
                                         _models.projection(model, 1, p).out_features) for p in _models.PROJECTIONS}
    return save(str(root / name), model, replacements, spec, name="tiny-llama"), replacements


def _copy(folder, root, name):
    import shutil

    target = Path(root) / name
    shutil.copytree(folder, target)
    return str(target)


def _edit_config(folder, change):
    from galinear.compress.storage.folder_format import CONFIG

    path = Path(folder) / CONFIG
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def _edit_tensors(folder, change, rehash=False):
    """Change the tensors of a folder; ``rehash`` also records their new checksums (a careful forger)."""
    from safetensors.torch import load_file, save_file

    from galinear.compress.storage import folder_format

    path = Path(folder) / folder_format.TENSORS
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata={"format": folder_format.FORMAT})
    if rehash:
        def update(config):
            for entry in config["modules"]:
                prefix = f"{entry['layer']}.{entry['projection']}."
                entry["tensors"] = folder_format.describe_tensors({k[len(prefix):]: v for k, v in tensors.items()
                                                                  if k.startswith(prefix)})
        _edit_config(folder, update)


_LOAD_AND_RUN = """
import sys
sys.path.insert(0, {root!r})
import torch
from galinear.compress import load
from galinear.rotor_kernels import spinor
from galinear.nn import RotorNetwork
from galinear.testing.models import tiny_llama
for folder in sys.argv[1:]:
    try:
        if folder == "kernel":  # the kernel itself, called past every module check
            net = RotorNetwork(32, 32, hidden=16).eval()
            with torch.no_grad():
                net(torch.randn(1, 32))
                checked = net._decode_state()
                perm = checked.input_perm.copy()
                perm[3] = 10 ** 9
                spinor.network_forward(torch.randn(1, 32).numpy(), checked.gadgets, perm, checked.hidden_perms,
                                       checked.branch, checked.slope, checked.eps)
        else:
            model = load(folder, tiny_llama())
            with torch.no_grad():
                model(input_ids=torch.tensor([[1, 2, 3, 4]]))
        print("RAN", folder, flush=True)
    except ValueError as error:
        print("REFUSED", folder, "|", str(error).replace(chr(10), " "), flush=True)
"""


def _load_and_run(folders, timeout=240):
    """Load and run each folder in a child process; the child must exit normally (no signal, no hang)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN.format(root=str(ROOT)), *folders],
                             capture_output=True, text=True, env=env, timeout=timeout)
    assert process.returncode == 0, (process.returncode, process.stderr[-3000:])  # -11 was the segfault
    lines = [line for line in process.stdout.splitlines() if line.startswith(("RAN", "REFUSED"))]
    assert len(lines) == len(folders), process.stdout + process.stderr[-3000:]
    return dict(zip(folders, lines))


def _permutation_cases(folder, root):
    """Copies of ``folder`` for the permutation test: {case: copy}. "huge", "minus-one", "zeros"
    and "float" have checksums forged to match; "unforged" holds another valid permutation in
    the stored dtype, checksums not forged (only the SHA-256 tells); "untouched" is not changed."""
    cases = {"huge": torch.full((16,), 10 ** 9), "minus-one": torch.full((16,), -1), "zeros": torch.zeros(16),
             "float": torch.arange(16.0)}
    key = "1.q_proj.input_permutation"
    out = {"untouched": _copy(folder, root, "untouched")}
    for name, value in cases.items():
        out[name] = _copy(folder, root, name)

        def change(tensors, value=value):
            tensors[key] = value.to(torch.float32 if name == "float" else torch.int64)
        _edit_tensors(out[name], change, rehash=True)
    out["unforged"] = _copy(folder, root, "unforged")
    _edit_tensors(out["unforged"], lambda t: t.__setitem__(key, t[key].flip(0)))
    return out


def _unopenable_cases(folder, root):
    """Copies of ``folder`` that would hang or fill memory: {case: copy}. "fifo": a FIFO named
    replacements.safetensors; "zero": the JSON a symlink to /dev/zero; "device": the tensors so."""
    out = {name: _copy(folder, root, name) for name in ("fifo", "zero", "device")}
    os.remove(Path(out["fifo"]) / "replacements.safetensors")
    os.mkfifo(Path(out["fifo"]) / "replacements.safetensors")
    os.remove(Path(out["zero"]) / "galinear_compressed.json")
    os.symlink("/dev/zero", Path(out["zero"]) / "galinear_compressed.json")
    os.remove(Path(out["device"]) / "replacements.safetensors")
    os.symlink("/dev/zero", Path(out["device"]) / "replacements.safetensors")
    return out


@pytest.fixture(scope="module")
def in_a_child(kept_rotor, tmp_path_factory):
    """The two tests below load and run their folders in one child process (each child starts
    torch and transformers, seconds): ({case: what the child said}, {case: ...}) for
    :func:`_permutation_cases` and :func:`_unopenable_cases`; the case "kernel" of the first calls
    the network kernel itself, past every module check."""
    _, folder = kept_rotor
    permutations = _permutation_cases(folder, tmp_path_factory.mktemp("permutations"))
    unopenable = _unopenable_cases(folder, tmp_path_factory.mktemp("unopenable"))
    said = _load_and_run(list(permutations.values()) + ["kernel"] + list(unopenable.values()))
    return ({**{case: said[copy] for case, copy in permutations.items()}, "kernel": said["kernel"]},
            {case: said[copy] for case, copy in unopenable.items()})


def test_saved_permutations_out_of_range_are_refused_not_a_crash(in_a_child):
    """Finding 1: out-of-range permutation values (checksums forged too) crashed `_norm_act` under
    no_grad with exit -11; in-range non-permutations gave wrong outputs silently. The kernel itself
    now checks its bounds too."""
    said = in_a_child[0]
    assert said["untouched"].startswith("RAN")  # the untouched folder loads and runs
    for case in ("huge", "minus-one", "zeros", "float", "unforged"):
        assert said[case].startswith("REFUSED") and "layer 1 q_proj" in said[case], said[case]
    assert "is not a permutation of 0..15: it holds 1000000000, outside 0..15" in said["huge"]
    assert "holds -1, outside 0..15" in said["minus-one"]
    assert "repeats an index" in said["zeros"]
    assert "tensor input_permutation is torch.float32" in said["float"]
    assert "does not match its recorded SHA-256" in said["unforged"]
    assert "input permutation holds values from" in said["kernel"] and "(valid 0..15)" in said["kernel"]


def _retype(folder, key, new_dtype):
    """Change one tensor's dtype in the safetensors header, bytes untouched (F32 -> I32 in the issue)."""
    from galinear.compress.storage.folder_format import TENSORS

    path = Path(folder) / TENSORS
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    header[key]["dtype"] = new_dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= size
    path.write_bytes(raw[:8] + text.ljust(size) + raw[8 + size:])


def _swap(tensors, a, b):
    for name in [k[len(a):] for k in tensors if k.startswith(a)]:
        tensors[a + name], tensors[b + name] = tensors[b + name], tensors[a + name]


def _set_nan(tensors):
    tensors["1.v_proj.output_gadget.alpha"] = torch.full_like(tensors["1.v_proj.output_gadget.alpha"], float("nan"))


def _as_int64(tensors):
    tensors["1.v_proj.output_gadget.alpha"] = tensors["1.v_proj.output_gadget.alpha"].to(torch.int64)


def _as_bool(tensors):
    tensors["1.v_proj.output_gadget.alpha"] = tensors["1.v_proj.output_gadget.alpha"] > 0


def _old_format(config):
    config["format"] = "galinear-compressed-v2"


# (name, how the folder is tampered with, what the error says): the reproductions
_TAMPERED = [
    ("layer -2", lambda f: _edit_config(f, lambda c: c["modules"][0].update(layer=-2)),
     "module 0: layer must be an integer >= 0, got -2"),
    ("layer 7 of 3", lambda f: _edit_config(f, lambda c: [m.update(layer=7) for m in c["modules"][:1]]),
     r"\"layers\" \[1\] differs from the layers of the modules"),
    ("key -1.q_proj", lambda f: _edit_tensors(f, lambda t: t.__setitem__("-1.q_proj.alpha", torch.ones(1))),
     r"holds tensors no recorded module has: \['-1.q_proj.alpha'\]"),
    ("modules []", lambda f: _edit_config(f, lambda c: c.update(modules=[])), r"\"modules\" must be a non-empty list"),
    ("projection x_proj", lambda f: _edit_config(f, lambda c: c["modules"][0].update(projection="x_proj")),
     "projection must be one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, got 'x_proj'"),
    ("vocab_size '64'", lambda f: _edit_config(f, lambda c: c["model"].update(vocab_size="64")),
     "model vocab_size must be a positive integer, got '64'"),
    ("F32 -> I32", lambda f: _retype(f, "1.v_proj.output_gadget.alpha", "I32"),
     "tensor output_gadget.alpha is torch.int32 .*, a RotorNetwork holds torch.float32"),
    ("NaN weights", lambda f: _edit_tensors(f, _set_nan), "does not match its recorded SHA-256"),
    ("NaN weights, forged checksums", lambda f: _edit_tensors(f, _set_nan, rehash=True),
     "tensor output_gadget.alpha holds NaN or infinity"),
    ("int64 tensor", lambda f: _edit_tensors(f, _as_int64, rehash=True), "output_gadget.alpha is torch.int64"),
    ("bool tensor", lambda f: _edit_tensors(f, _as_bool, rehash=True), "output_gadget.alpha' has dtype 'bool'"),
    ("k and v swapped", lambda f: _edit_tensors(f, lambda t: _swap(t, "1.k_proj.", "1.v_proj.")),
     "layer 1 k_proj: tensor .* does not match its recorded SHA-256"),
    ("class edited", lambda f: _edit_config(f, lambda c: c["modules"][0].update({"class": "Linear"})),
     r"holds tensors no recorded module has: \['1.k_proj.activation.weight'"),
    ("method edited", lambda f: _edit_config(f, lambda c: c["method"].update(surprise=1)),
     "the recorded method is not one this galinear builds"),
    ("old format", lambda f: _edit_config(f, _old_format), "written by an older galinear .*no checksum"),
    ("truncated", lambda f: truncate_file(Path(f) / "replacements.safetensors", 0.5), "not a readable safetensors file"),
    ("2 GB sparse", lambda f: os.truncate(Path(f) / "replacements.safetensors", 2 << 30),
     "holds 2,147,483,648 bytes, more than the"),
    ("folder for the tensors", lambda f: (os.remove(Path(f) / "replacements.safetensors"),
                                          os.mkdir(Path(f) / "replacements.safetensors")), "is a folder"),
    ("rank 10**9", lambda f: _edit_config(f, lambda c: c["method"].update(rank=10 ** 9)),
     "rank sets the size of lr and lr-cf; method rotor has no rank"),
    ("epochs 'nan'", lambda f: _edit_config(f, lambda c: c["method"].update(epochs="nan")),
     "the recorded method .*epochs must be a finite number > 0, got 'nan'"),
    ("in_features 10**12", lambda f: _edit_config(f, lambda c: c["modules"][0]["settings"].update(in_features=10 ** 12)),
     "layer 1 k_proj: in_features 1,000,000,000,000 disagrees with the model's hidden_size 32"),
    ("shape [-1, 32]", lambda f: _edit_config(f, lambda c: next(iter(c["modules"][0]["tensors"].values())).update(
        shape=[-1, 32])), r"layer 1 k_proj tensor .* has shape \[-1, 32\]; a shape is a list of sizes >= 0"),
    ("index names itself", lambda f: (os.remove(Path(f) / "galinear_compressed.json"),
                                      (Path(f) / "index.json").write_text('{"models": ["."]}')),
     "\"models\" must list the names of the folders beside it"),
]


@pytest.fixture(scope="module")
def kept_rotor(tmp_path_factory):
    root = tmp_path_factory.mktemp("kept")
    return root, _rotor_folder(root)[0]


@pytest.mark.parametrize("name, tamper, message", _TAMPERED, ids=[t[0] for t in _TAMPERED])
def test_tampered_folders_are_refused_with_the_reason(kept_rotor, tmp_path, name, tamper, message):
    """Finding 4: each of these installed garbage, NaN logits or another layer silently, or ended in
    a traceback; now each is refused before anything is installed, naming what is wrong."""
    from galinear.compress import load
    from galinear.testing.models import tiny_llama

    _, folder = kept_rotor
    copy = _copy(folder, tmp_path, "copy")
    tamper(copy)
    model = tiny_llama()
    before = {p: _models.projection(model, 1, p) for p in _models.PROJECTIONS}
    with pytest.raises(ValueError, match=message):
        load(copy, model)
    assert all(_models.projection(model, 1, p) is m for p, m in before.items())  # nothing installed


def test_folders_that_would_hang_or_fill_memory_are_refused_before_opening(in_a_child):
    """A FIFO named replacements.safetensors hung (Ctrl-C could not break it); a JSON symlinked to
    /dev/zero filled memory; a device in place of the tensors likewise."""
    said = in_a_child[1]
    assert "is a FIFO (named pipe), not a regular file" in said["fifo"]
    assert "galinear_compressed.json: is a device, not a regular file" in said["zero"]
    assert "replacements.safetensors: is a device, not a regular file" in said["device"]


def test_generate_reports_every_failure_as_one_line(kept_rotor, tmp_path, monkeypatch, capsys):
    """26 of 91 tampered folders ended `galinear generate` in a traceback; now each is one line, exit 2."""
    from galinear.cli import main
    from galinear.compress.storage import install
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import DecodingCharTokenizer, tiny_llama

    monkeypatch.setattr(_models, "load_model", lambda source, gguf=None, **kw: LoadedModel(
        tiny_llama(), DecodingCharTokenizer(), source))
    _, folder = kept_rotor
    for i, (name, tamper, message) in enumerate(_TAMPERED):
        copy = _copy(folder, tmp_path, f"case{i}")
        tamper(copy)
        assert main(["generate", copy, "--model", "tiny", "--tokens", "2"]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("galinear generate: error: ") and err.count("\n") == 1, (name, err)
        assert re.search(message, err), (name, err)
    monkeypatch.setattr(install, "load", lambda *a, **k: {}["a key no folder has"])  # any other failure
    assert main(["generate", folder, "--model", "tiny", "--tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KeyError" in err and "Traceback" not in err
    assert main(["generate", folder, "--model", "tiny", "--tokens", "2"]) == 2  # still the same, no state left


def test_load_checks_the_whole_model_not_only_the_embedding(kept_rotor):
    """Finding 2 for load: another model with the same embedding and norms was accepted."""
    from galinear.compress import load
    from galinear.testing.models import tiny_llama

    _, folder = kept_rotor
    other = tiny_llama()
    with torch.no_grad():
        other.model.layers[2].mlp.down_proj.weight[0, 0] += 1e-3  # one weight, far from the embedding
    with pytest.raises(ValueError, match="same shapes but other weights or configuration"):
        load(folder, other)
    changed = tiny_llama()
    changed.config.rope_theta = 1234.0  # the configuration counts too
    with pytest.raises(ValueError, match="other weights or configuration"):
        load(folder, changed)
    load(folder, other, check_weights=False)  # the caller knows better


def test_the_same_model_in_bfloat16_is_named_as_such(tmp_path):
    """The same model loaded as bfloat16 was called "other weights"."""
    from galinear.compress import load
    from galinear.testing.models import tiny_llama

    folder, _ = _rotor_folder(tmp_path)
    with pytest.raises(ValueError, match="float32 weights; this model's weights are bfloat16.*load the model as "
                                         "float32.*check_weights=False") as error:
        load(folder, tiny_llama(dtype=torch.bfloat16))
    assert "other weights" not in str(error.value)
    exact = tiny_llama(dtype=torch.bfloat16).float()  # float32 weights that bfloat16 holds exactly
    folder, _ = _rotor_folder(tmp_path, model=exact, name="exact")
    model = load(folder, tiny_llama(dtype=torch.bfloat16))  # the same values: accepted
    assert type(_models.projection(model, 1, "q_proj")).__name__ == "RotorNetwork"
