"""``--device`` of ``galinear quantize`` (``QuantizeConfig.device``): checked before any model loads, the CPU
study unchanged by it, a study resumed on another device, learned-rotation checkpoints that load on the
rotation's device, and, where CUDA exists, a whole tiny study on the GPU against the CPU's numbers."""
import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear import _io  # noqa: E402
from galinear.cli import build_parser, main  # noqa: E402
from galinear.commands.quantize import config_from_args  # noqa: E402
from galinear.quantize import calibrate, optimise  # noqa: E402
from galinear.quantize.config import QuantizeConfig, check_device  # noqa: E402
from galinear.quantize.rotations import Rotation  # noqa: E402
from galinear.testing.folders import tiny_model_folder  # noqa: E402

NO_CUDA = r"no CUDA device is visible to torch \(torch\.cuda\.is_available\(\) is False\); use --device cpu, or " \
          r"install a CUDA build of torch"


def _cuda(monkeypatch, available: bool, count: int = 0) -> None:
    """Make torch see ``count`` CUDA devices (or none), whatever this machine has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_the_device_defaults_to_the_cpu_and_is_parsed_from_the_command_line(monkeypatch, tmp_path):
    assert QuantizeConfig().device == "cpu"
    _cuda(monkeypatch, True, 2)
    parser = build_parser()
    given = config_from_args(parser.parse_args(["quantize", "--device", "cuda:1", "--out", str(tmp_path)]))
    default = config_from_args(parser.parse_args(["quantize", "--out", str(tmp_path)]))
    assert (given.device, default.device) == ("cuda:1", "cpu")
    assert check_device("cuda") == torch.device("cuda") and check_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "mps", "", "cuda0", 0, None])
def test_a_device_that_is_not_cpu_or_cuda_names_the_choices(device):
    with pytest.raises(ValueError, match=r"--device: .* is not a device galinear quantize runs on; give cpu, cuda "
                                         r"or cuda:N \(N the index of a CUDA GPU\)"):
        QuantizeConfig(device=device).check()


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_a_cuda_device_without_cuda_names_the_fix(device, monkeypatch):
    _cuda(monkeypatch, False)
    with pytest.raises(ValueError, match=rf"^--device {device}: {NO_CUDA}$"):
        QuantizeConfig(device=device).check()
    QuantizeConfig(device="cpu").check()  # the CPU needs nothing


def test_a_gpu_index_beyond_the_visible_ones_names_them(monkeypatch):
    _cuda(monkeypatch, True, 2)
    with pytest.raises(ValueError, match=r"--device cuda:2: torch sees 2 CUDA device\(s\), cuda:0 to cuda:1; give "
                                         r"one of them"):
        check_device("cuda:2")
    assert check_device("cuda:1") == torch.device("cuda", 1)


# ------------------------------------------------------------------------------------ studies
@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("model"))


#: A tiny study: a learned family (rotor), quantized activations and KV cache (R3), every step a few seconds.
TINY = ("--wbits", "4", "--abits", "8", "--kvbits", "8", "--rotations", "none,hadamard,rotor", "--seeds", "0",
        "--steps", "2", "--lr", "0.01", "--tokens-per-step", "16", "--calib-windows", "2", "--window", "32",
        "--wikitext-windows", "2", "--wikitext-window", "32", "--heldout-windows", "1", "--threads", "1",
        "--no-progress")


def _rows(out) -> list:
    """The rows of a study's results.json without what is timed (seconds)."""
    rows = _io.load_json(os.path.join(out, "results.json"))["rows"]
    for row in rows:
        row.pop("calibration_seconds", None)
        if row.get("training"):
            row["training"].pop("seconds", None)
    return rows


@pytest.fixture
def offline(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")


def test_a_cpu_study_given_device_cpu_is_the_default_study_and_resumes_on_another_device(folder, tmp_path, offline,
                                                                                         capsys):
    default, given = str(tmp_path / "default"), str(tmp_path / "given")
    assert main(["quantize", "--model", folder, *TINY, "--out", default]) == 0
    assert main(["quantize", "--model", folder, *TINY, "--device", "cpu", "--out", given]) == 0
    rows = _rows(default)
    assert rows == _rows(given)  # to the last bit: the same floats
    assert [r["family"] for r in rows] == ["float (not quantized)", "none", "hadamard", "rotor"]
    assert {r["device"] for r in rows} == {"cpu"} and rows[-1]["training"]["steps"] == 2
    assert "on cpu" in capsys.readouterr().out

    # another device does not make the rows again: the finished ones are read back (they still say cpu)
    assert main(["quantize", "--model", folder, *TINY, "--device", "cpu:0", "--out", default]) == 0
    assert _rows(default) == rows
    assert _io.load_json(os.path.join(default, "results.json"))["settings"]["device"] == "cpu:0"


def _error_training(rotation, checkpoint, steps):
    """A few steps of :func:`~galinear.quantize.calibrate.train_rotation` on random statistics, checkpointed."""
    generator = torch.Generator().manual_seed(0)
    width = rotation.width
    weights = [{"q_proj": torch.randn(16, width, generator=generator)} for _ in range(2)]
    inputs = [torch.randn(40, width, generator=generator, dtype=torch.float64) for _ in range(2)]
    stats = [{"q_proj": {"hessian": x.t() @ x, "rows": x[:8].float(), "count": 40}} for x in inputs]
    return calibrate.train_rotation(rotation, weights, stats, 4, steps=steps, layers_per_step=1, rows_per_step=None,
                                    rotated=("q_proj",), checkpoint=checkpoint, checkpoint_every=1)


@pytest.mark.filterwarnings("ignore:.*to a meta parameter:UserWarning")
def test_a_learned_rotation_checkpoint_loads_onto_the_device_the_rotation_was_moved_to(tmp_path):
    path = str(tmp_path / "rotor.safetensors")
    trained = _error_training(Rotation("rotor", 32, 0), path, steps=2)
    state = _io.load_state(path, pickles=False)
    tensors = [v for v in state["rotation"].values()] + [t for s in state["optimiser"]["state"].values()
                                                          for t in s.values()]
    assert tensors and all(t.device.type == "cpu" for t in tensors)  # saved from CPU copies
    # resumed by a rotation on another device (meta: shapes without data, a device every machine has): the
    # parameters stay where the rotation is and Adam's moments follow them there
    moved = Rotation("rotor", 32, 0).to("meta")
    optimiser = torch.optim.Adam([p for p in moved.parameters() if p.requires_grad], lr=0.01)
    step, history = optimise._restore(path, moved, optimiser, state["settings"])
    assert (step, history) == (2, trained["history"])
    assert {t.device.type for t in moved.state_dict().values()} == {"meta"}
    moments = [t for s in optimiser.state_dict()["state"].values() for k, t in s.items() if k != "step"]
    assert moments and {t.device.type for t in moments} == {"meta"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_study_on_cuda_gives_the_cpu_numbers_to_float_rounding_and_resumes_on_the_cpu(tmp_path, offline):
    """Tolerances (absolute, ln PPL in nats; the tiny random model scores about 4.18): 1e-4 for the rows
    without training (float, none, hadamard: the same weights rounded on the same grids, the GPU's
    float32 kernels summing in another order), 5e-3 for the learned rotor (two Adam steps from zero move
    each parameter by about +-lr, the sign set by a gradient the GPU computes with other rounding)."""
    path = tiny_model_folder(tmp_path / "model")
    with open(os.path.join(path, "config.json")) as f:
        settings = json.load(f)
    with open(os.path.join(path, "config.json"), "w") as f:  # the next-sentence items need more positions
        json.dump({**settings, "max_position_embeddings": 2048}, f)
    gpu, cpu = str(tmp_path / "gpu"), str(tmp_path / "cpu")
    extra = ("--accuracy-items", "2", "--save")
    assert main(["quantize", "--model", path, *TINY, *extra, "--device", "cuda", "--out", gpu]) == 0
    assert main(["quantize", "--model", path, *TINY, *extra, "--device", "cpu", "--out", cpu]) == 0
    on_gpu, on_cpu = _rows(gpu), _rows(cpu)
    assert [r["family"] for r in on_gpu] == [r["family"] for r in on_cpu]
    for a, b in zip(on_gpu, on_cpu):
        assert a["device"] == "cuda" and b["device"] == "cpu"
        tolerance = 5e-3 if a["family"] == "rotor" else 1e-4
        for key in ("wikitext_ln_ppl", "heldout_ln_ppl"):
            assert abs(a[key] - b[key]) <= tolerance, (a["family"], key, a[key], b[key])
        assert 0.0 <= a["acc"] <= 1.0
    assert on_gpu[-1]["training"]["steps"] == 2
    # the saved folders hold CPU tensors and load as plain models
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(os.path.join(gpu, "models", "rotor-s0"), use_safetensors=True)
    assert {p.device.type for p in saved.parameters()} == {"cpu"}

    # the GPU study, scored again on the CPU: each model made again there, the rotor from its GPU checkpoint
    assert main(["quantize", "--model", path, *TINY, "--accuracy-items", "3", "--device", "cpu", "--out", gpu]) == 0
    again = {r["family"]: r for r in _rows(gpu)}
    assert again["rotor"]["device"] == "cpu" and again["rotor"]["rescored_from"]["accuracy_items"] == 2
    assert again["rotor"]["training"] == on_gpu[-1]["training"]  # resumed from the finished checkpoint, not retrained
    # each row names its machine: the GPU's rows their GPU, the rescored rotor the GPU that calibrated it
    assert all("gpu" in r["machine"] for r in on_gpu) and not any("gpu" in r["machine"] for r in on_cpu)
    assert again["rotor"]["calibrated_on"] == on_gpu[-1]["machine"] and "gpu" not in again["rotor"]["machine"]
    assert abs(again["rotor"]["wikitext_ln_ppl"] - on_gpu[-1]["wikitext_ln_ppl"]) <= 5e-3
