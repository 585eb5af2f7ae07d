"""Replacement modules for one projection, and their training settings.

Methods (paper-notes sections 4-6):

========  ============================================================  =========
name      module                                                        Adam lr
========  ============================================================  =========
rotor     ``galinear.nn.RotorNetwork(d_in, d_out, hidden=H)``           0.05
lr1       ``galinear.nn.LowRankLinear(d_in, d_out, rank=1)``            0.05
lr4       ``galinear.nn.LowRankLinear(d_in, d_out, rank=4)``            0.05
bh1       ``galinear.nn.BlockHadamardLinear(d_in, d_out, blocks, 1)``   0.01
dense     ``torch.nn.Linear(d_in, d_out, bias=False)`` (sanity)         0.01
zero      :class:`ZeroProjection`: outputs 0, no parameters (sanity)    -
lr1-cf    ``LowRankLinear(d_in, d_out, rank=1)``, closed form           -
lr4-cf    ``LowRankLinear(d_in, d_out, rank=4)``, closed form           -
bh1-cf    ``BlockHadamardLinear(d_in, d_out, blocks, 1)``, closed form  -
rotorlin-m ``galinear.nn.RotorLinear(d_in, d_out)``, Adam on moments   0.05
========  ============================================================  =========

The ``-cf`` methods (shown as LR1*, LR4*, BH1* in reports) are the same modules as lr1, lr4 and
bh1, set to their exact optimum over all training rows from second moments
(:mod:`galinear.compress.closed_form`: reduced-rank regression, one least-squares solve per
block) instead of being fitted by Adam. They do not depend on the seed. ``rotorlin-m`` is one
linear rotor gadget (``RotorLinear``, no hidden layer, no nonlinearity) fitted by Adam on the
exact mean squared error over all training rows, computed from the same second moments
(:func:`galinear.compress.closed_form.fit_on_moments`); its initialisation depends on the seed.

``MethodSpec.objective`` ("qkv" by default) chooses what an Adam-fitted method is fitted to: each
projection's outputs, or (``attention``, ``logits``) the layer's attention output or the model's
next-token distribution with q, k and v fitted jointly (:mod:`galinear.compress.objective`). It
enters the tag (``-objattention``), so such fits are cached apart.

The dense method is a sanity baseline: a fresh full matrix fitted by the same loop should land
close to the original model. The zero method is the other end: q = k = v = 0 switches the
layer's attention off (uniform weights over zero values), so a replacement that does no better
than ``zero`` has learned nothing useful. The rotor, low-rank and block-Hadamard modules come from
:mod:`galinear.nn`; this module only builds them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from galinear import _util

METHODS = ("rotor", "lr1", "lr4", "bh1", "dense", "zero", "lr1-cf", "lr4-cf", "bh1-cf", "rotorlin-m")
CLOSED_FORM = {"lr1": "lr1-cf", "lr4": "lr4-cf", "bh1": "bh1-cf"}  # Adam-fitted name -> closed-form name
LEARNING_RATES = {"rotor": 0.05, "lr1": 0.05, "lr4": 0.05, "bh1": 0.01, "dense": 0.01, "zero": 0.0,
                  "lr1-cf": 0.0, "lr4-cf": 0.0, "bh1-cf": 0.0, "rotorlin-m": 0.05}
DISPLAY = {"lr1-cf": "LR1*", "lr4-cf": "LR4*", "bh1-cf": "BH1*", "rotorlin-m": "RotorLinear (moments)"}


def base_name(name: str) -> str:
    """The module family of a method: 'lr1-cf' -> 'lr1'."""
    return name[:-3] if name.endswith("-cf") else name


def display_name(name: str) -> str:
    """Name of a method in reports: LR1*, LR4*, BH1* for the closed-form fits, else the name."""
    return DISPLAY.get(name, name)
DEFAULT_ROTOR_HIDDEN = 512


@dataclass(frozen=True)
class MethodSpec:
    """Everything that determines a replacement module and its fit (part of every cache key)."""

    name: str
    epochs: float = 1.0
    lr: float | None = None
    hidden: int | None = DEFAULT_ROTOR_HIDDEN  # rotor only
    blocks: int | None = None                  # bh1 only: None picks the largest divisor <= 48
    batch_size: int = 256
    max_steps: int | None = None               # set: fit until the validation MSE stops improving
    eval_every: int | None = None              # (galinear.compress.converge), at most max_steps
    patience: int | None = None
    objective: str = "qkv"                     # "attention" / "logits": q, k, v fitted jointly
                                               # (galinear.compress.objective)

    def __post_init__(self):
        if self.name not in METHODS:
            raise ValueError(f"unknown method {self.name!r}; choose from {', '.join(METHODS)}")
        if not self.epochs > 0:
            raise ValueError(f"epochs must be positive, got {self.epochs}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.objective not in ("qkv", "attention", "logits"):
            raise ValueError(f"spec objective must be qkv, attention or logits, got {self.objective!r}")
        if self.objective != "qkv" and (self.moment_fit or self.name == "zero"):
            raise ValueError(f"spec objective {self.objective!r} applies to Adam-fitted methods; {self.name} is "
                             "fitted from second moments or has no parameters: use objective='qkv' for it")

    @property
    def learning_rate(self) -> float:
        return LEARNING_RATES[self.name] if self.lr is None else self.lr

    @property
    def closed_form(self) -> bool:
        """True for the methods fitted exactly from second moments (no optimiser, no seed)."""
        return self.name.endswith("-cf")

    @property
    def moment_fit(self) -> bool:
        """True for the methods fitted on the second moments of all training rows (closed form or Adam)."""
        return self.closed_form or self.name == "rotorlin-m"

    def tag(self) -> str:
        """Short unique name of the spec, used in folder names."""
        if self.closed_form:
            return self.name + (f"-b{self.blocks}" if self.name == "bh1-cf" and self.blocks is not None else "")
        parts = [self.name]
        if self.name == "rotor":
            parts.append(f"h{self.hidden}")
        if self.name == "bh1" and self.blocks is not None:
            parts.append(f"b{self.blocks}")
        if self.max_steps:
            parts.append(f"conv{self.max_steps}-v{self.eval_every}-p{self.patience}")
        else:
            parts.append(f"e{self.epochs:g}")
        parts.append(f"lr{self.learning_rate:g}")
        if self.batch_size != 256:
            parts.append(f"bs{self.batch_size}")
        if self.objective != "qkv":
            parts.append(f"obj{self.objective}")
        return "-".join(parts)

    def to_dict(self) -> dict:
        return asdict(self)


def _zero_projection_class():
    import torch

    class ZeroProjection(torch.nn.Module):
        """y = 0 (or the bias, if any): the no-information baseline; no parameters without bias."""

        def __init__(self, in_features, out_features, bias=False):
            super().__init__()
            self.in_features, self.out_features = in_features, out_features
            self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None

        def forward(self, x):
            y = x.new_zeros(x.shape[:-1] + (self.out_features,))
            return y + self.bias if self.bias is not None else y

    return ZeroProjection


def block_count(d_in: int, d_out: int, preferred: int | None = None, largest: int = 48) -> int:
    """Number of BH1 blocks: ``preferred`` if it divides both widths, else the largest such <= ``largest``.

    For SmolLM2 (576 -> 576 and 576 -> 192) this gives 48 blocks of 12 x 12 and 12 x 4.
    """
    if preferred is not None:
        if d_in % preferred or d_out % preferred:
            raise ValueError(f"{preferred} blocks do not divide the projection shape {d_in} -> {d_out}; "
                             f"pick a common divisor of {d_in} and {d_out}")
        return preferred
    for blocks in range(min(largest, d_in, d_out), 0, -1):
        if d_in % blocks == 0 and d_out % blocks == 0:
            return blocks
    return 1


def module_class(name: str):
    """The galinear.nn class that implements method ``name`` (rotor, lr1, lr4, bh1 or a -cf form)."""
    from galinear.nn import BlockHadamardLinear, LowRankLinear, RotorLinear, RotorNetwork

    return {"rotor": RotorNetwork, "lr1": LowRankLinear, "lr4": LowRankLinear,
            "bh1": BlockHadamardLinear, "rotorlin-m": RotorLinear}[base_name(name)]


def build_module(spec: MethodSpec, d_in: int, d_out: int, bias: bool = False):
    """A freshly initialised replacement for a ``d_in -> d_out`` projection (float32, CPU).

    ``bias`` follows the original projection (Qwen2-style q/k/v carry one). Seed torch's
    generator before calling for a reproducible initialisation.
    """
    import torch

    if spec.name == "dense":
        return torch.nn.Linear(d_in, d_out, bias=bias)
    if spec.name == "zero":
        return _zero_projection_class()(d_in, d_out, bias=bias)
    cls = module_class(spec.name)
    if spec.name == "rotor":
        return cls(d_in, d_out, hidden=spec.hidden, bias=bias)
    if spec.name == "rotorlin-m":
        return cls(d_in, d_out, bias=bias)
    if base_name(spec.name) in ("lr1", "lr4"):
        return cls(d_in, d_out, rank=1 if base_name(spec.name) == "lr1" else 4, bias=bias)
    blocks = block_count(d_in, d_out, spec.blocks)
    return cls(d_in, d_out, blocks=blocks, depth=1, bias=bias)


def count_parameters(module) -> int:
    """Trainable and fixed parameters of a module: sum of ``p.numel()`` over ``parameters()``."""
    return _util.count_parameters(module)
