"""Settings of a quantization study (:class:`QuantizeConfig`, the options of ``galinear quantize``)
and its named presets."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from galinear.lm.sources import DEFAULT_MODEL
from galinear.quantize.optimise import OPTIMIZERS
from galinear.quantize.quantizers import ACTIVATION_BITS, check_bits, check_group_size
from galinear.quantize.rotations import FAMILIES

__all__ = ["QuantizeConfig", "OBJECTIVES", "PRESETS", "preset", "check_device"]

#: Training objectives of the learned rotations (:mod:`galinear.quantize.calibrate`).
OBJECTIVES = ("distill", "error")


@dataclass
class QuantizeConfig:
    """Settings of one quantization study (``galinear quantize``; the fields are its options)."""

    model: str = DEFAULT_MODEL
    gguf_file: str | None = None
    wbits: int = 4
    abits: int = 16
    kvbits: int = 16
    method: str = "rtn"
    symmetric: bool = True
    group_size: int | None = None
    damp: float = 0.01
    act_order: bool = True
    rotations: tuple = FAMILIES
    seeds: tuple = (0,)
    chunk: int | None = None
    rotor_layers: int = 1
    objective: str = "distill"
    optimizer: str = "adam"
    steps: int = 20
    lr: float = 0.02
    tokens_per_step: int | None = None
    layers_per_step: int = 8
    rows_per_step: int | None = 64
    calib_windows: int = 8
    window: int = 256
    wikitext_windows: int | None = 8
    wikitext_window: int = 256
    heldout_windows: int = 4
    accuracy_items: int = 0
    threads: int | None = None
    device: str = "cpu"
    out_dir: str = "runs/quantize"
    save: bool = False
    progress: bool = True
    extra: dict = field(default_factory=dict)

    def check(self) -> None:
        check_bits(self.wbits)
        check_group_size(self.group_size)
        if self.group_size is not None and self.objective == "error":
            raise ValueError("--objective error takes one grid per output channel; give --objective distill with "
                             "--group-size, or leave --group-size out")
        if isinstance(self.rotor_layers, bool) or not isinstance(self.rotor_layers, int) or self.rotor_layers < 1:
            raise ValueError(f"--rotor-layers must be an integer >= 1, got {self.rotor_layers!r}")
        check_bits(self.abits, "activation", ACTIVATION_BITS, "--abits")
        check_bits(self.kvbits, "KV cache", ACTIVATION_BITS, "--kvbits")
        if self.method not in ("rtn", "gptq"):
            raise ValueError(f"--method: unknown weight quantizer {self.method!r}; choose rtn or gptq")
        unknown = [r for r in self.rotations if r not in FAMILIES]
        if unknown or not self.rotations:
            raise ValueError(f"--rotations: unknown rotation family {', '.join(unknown) or '(none given)'}; choose "
                             f"from {', '.join(FAMILIES)}")
        for name in ("calib_windows", "window", "wikitext_window", "heldout_windows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective: unknown training objective {self.objective!r}; choose "
                             f"{' or '.join(OBJECTIVES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"--optimizer: unknown optimizer {self.optimizer!r}; choose {' or '.join(OPTIMIZERS)}")
        if self.optimizer == "descent" and self.objective != "distill":
            raise ValueError("--optimizer descent follows the distillation loss over every calibration window; give "
                             "--objective distill, or --optimizer adam for --objective error")
        if self.tokens_per_step is not None and (isinstance(self.tokens_per_step, bool)
                                                 or not isinstance(self.tokens_per_step, int)
                                                 or self.tokens_per_step < 2):
            raise ValueError(f"--tokens-per-step must be an integer >= 2, got {self.tokens_per_step!r}")
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"--steps must be an integer >= 0, got {self.steps!r}")
        check_device(self.device)


def check_device(name) -> torch.device:
    """The torch device of ``--device`` (``cpu``, ``cuda`` or ``cuda:N``) when this machine has it, else
    ValueError naming the fix."""
    try:
        device = torch.device(name) if isinstance(name, str) else None
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device: {name!r} is not a device galinear quantize runs on; give cpu, cuda or cuda:N "
                         "(N the index of a CUDA GPU)")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: no CUDA device is visible to torch (torch.cuda.is_available() is "
                             "False); use --device cpu, or install a CUDA build of torch")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(f"--device {name}: torch sees {count} CUDA device(s), cuda:0 to cuda:{count - 1}; "
                             "give one of them")
    return device


#: Named settings (``--preset``): demo runs on the embedded default in a few minutes on 2 cores (the
#: seed-0 rows of the W4A16 RTN study in docs/results.md).
PRESETS = {
    "demo": dict(wbits=4, abits=16, method="rtn", rotations=FAMILIES, seeds=(0,), objective="distill", steps=12,
                 lr=0.005, tokens_per_step=128, calib_windows=4, window=256, wikitext_windows=6, wikitext_window=256,
                 heldout_windows=3, accuracy_items=0),
    "standard": dict(),
}


def preset(name: str, **changes) -> QuantizeConfig:
    if name not in PRESETS:
        raise ValueError(f"--preset: unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return QuantizeConfig(**{**PRESETS[name], **changes})

