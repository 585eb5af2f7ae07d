"""Bad input to ``galinear quantize`` and its Python entry points: one line naming the problem and the fix,
before any model loads."""
import re

import pytest
import torch

from galinear.cli import main
from galinear.quantize.config import QuantizeConfig, preset
from galinear.quantize.rotations import Rotation


@pytest.mark.parametrize("argv, message", [
    (["--wbits", "9"], r"--wbits: weight bit width must be an integer in 2\.\.8, got 9; give --wbits 4"),
    (["--wbits", "1"], r"--wbits: weight bit width must be an integer in 2\.\.8"),
    (["--abits", "17"], r"--abits: activation bit width must be an integer in 2\.\.16 \(16 keeps them"),
    (["--kvbits", "0"], r"--kvbits: KV cache bit width"),
    (["--rotations", "hadamard,spin"], r"--rotations: unknown rotation family spin; choose from none, hadamard"),
    (["--group-size", "1"], r"--group-size: a weight group is an integer number >= 2 of input columns, got 1"),
    (["--group-size", "64", "--objective", "error"], r"--objective error takes one grid per output channel"),
    (["--method", "awq"], r"--method: unknown weight quantizer 'awq'; choose rtn or gptq"),
    (["--window", "0"], r"--window must be a positive integer"),
    (["--objective", "mse"], r"--objective: unknown training objective 'mse'; choose distill or error"),
    (["--tokens-per-step", "1"], r"--tokens-per-step must be an integer >= 2, got 1"),
    (["--device", "gpu"], r"--device: 'gpu' is not a device galinear quantize runs on; give cpu, cuda or cuda:N"),
    (["--device", "cuda"], (r"--device cuda: no CUDA device is visible to torch \(torch\.cuda\.is_available\(\) "
                            r"is False\); use --device cpu, or install a CUDA build of torch")),
    (["--device", "cuda:1"], r"--device cuda:1: no CUDA device is visible to torch"),
])
def test_bad_options_are_one_line_before_loading(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without CUDA
    code = main(["quantize", *argv, "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("galinear quantize: error: ")
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_a_width_no_hadamard_order_covers_is_refused_by_the_hadamard_family():
    with pytest.raises(ValueError, match=r"no Hadamard matrix of order 584.*cayley"):
        Rotation("hadamard", 584)
    assert Rotation("cayley", 20).matrix().shape == (20, 20)  # a learned family starts anywhere


def test_a_bad_chunk_names_the_fix():
    with pytest.raises(ValueError, match=r"--chunk: the rotor rotation needs a power-of-two chunk >= 4 dividing the "
                                         r"width 576, got 48; give --chunk 64"):
        Rotation("rotor", 576, chunk=48)


def test_presets_are_checked_configs():
    assert preset("demo").rotations == ("none", "hadamard", "cayley", "butterfly", "rotor")
    with pytest.raises(ValueError, match="--preset: unknown preset 'fast'; choose one of demo, standard"):
        preset("fast")
    QuantizeConfig().check()
