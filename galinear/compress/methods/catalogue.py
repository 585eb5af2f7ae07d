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
lr        ``LowRankLinear(d_in, d_out, rank=spec.rank)`` (default 4)    0.05
kron      ``galinear.nn.KroneckerSumLinear(d_in, d_out, terms)``        0.01
monarch   ``galinear.nn.MonarchLinear(d_in, d_out, blocks)``            0.01
bhh       ``galinear.nn.MixedBlockHadamardLinear(d_in, d_out, blocks)`` 0.01
givens    ``galinear.nn.GivensNetwork(d_in, d_out, hidden=H)``          0.05
lr-cf     ``lr``, reduced-rank regression (exact)                        -
kron-cf   ``kron``, nearest Kronecker sum to W_ols (from W)              -
monarch-cf ``monarch``, Monarch projection of W_ols (from W)            -
bhh-cf    ``bhh``, block fit to the Hadamard-turned targets (exact)      -
========  ============================================================  =========

Sizes and cost per token of a d_in -> d_out projection (no bias; multiply-adds; SmolLM2's q is
576 -> 576 with 331,776 dense parameters, k and v 576 -> 192 with 110,592;
:mod:`galinear.compress.methods.budgets` computes them and matches every method to a parameter budget):

=========  ======================================  =====================================  ===================
method     parameters                              multiply-adds per token                knob
=========  ======================================  =====================================  ===================
lr         r (d_in + d_out)                        r (d_in + d_out)                       rank r
bh1        b ceil(d_out/b) ceil(d_in/b)            the same                               blocks b
kron       t (m1 n1 + m2 n2)                       t n1 m2 (n2 + m1)                      terms t
monarch    d_out d_in / b + d_out b                the same                               blocks b
bhh        d_out ceil(d_in/b)                      the same + d_out log2(b) additions     blocks b (power of 2)
rotor      sum over gadgets of P (2 C(n,2) + 1),   sum over gadgets of P 2 k (2n + 1) c   chunk c at width H
           + 1 (PReLU) + 6 (branch weights)        (k = n // 2 simple rotors per side)
givens     the rotor network's count               sum over gadgets of P 2 G c            chunk c at width H
=========  ======================================  =====================================  ===================

(m1, n1), (m2, n2) are the Kronecker factor shapes, default m1, n1 the largest divisors of
d_out, d_in <= their square roots (24x24 kron 24x24 for 576 -> 576); a gadget has P chunk pairs
of c = 2^n coordinates, G = 2 C(n, 2) Givens layers per pair (as c x c matrices, the form both
run in on the CPU, a pair costs c^2). The rotor network and its control grow by smaller chunks at
a fixed hidden width H (``MethodSpec.chunk``; a budget sets it): halving c about quadruples the
pairs and keeps C(n, 2) per pair nearly as large, while the matrix form's cost, one c x c block per
pair, stays d_in H + ... per token (at H = 512 on SmolLM2's q/k/v: 0.47 % of the dense
parameters with the largest chunks, 3.0 % at c = 128, 8.3 % at c = 64). Growing H instead costs
compute in proportion and adds few parameters (11x the width for 2 %). Monarch needs b to divide both widths
and is smallest at b = sqrt(d_in) (27,648 parameters for q, 9,216 for k and v: 8.3 % of q/k/v);
bhh needs b a power of two dividing d_out (at most 64 for SmolLM2: 1.6 %).

The four ``-cf`` forms of lr, kron, monarch and bhh are fitted from the second moments
(:mod:`galinear.compress.fitting.closed_form`). ``lr-cf`` and ``bhh-cf`` are the exact optimum of the
mean squared error over all training rows (reduced-rank regression; one least-squares solve per
block on the targets turned by the orthogonal Hadamard mix). ``kron-cf`` and ``monarch-cf`` are
exact in the weight only: the Frobenius-nearest member of the class to W_ols = C_yx C_xx^-1
(rearrangement + truncated SVD, Van Loan & Pitsianis 1993; per sub-block rank-1 SVD), which
minimises the MSE only when C_xx is a multiple of the identity. ``givens`` (the orthogonal
control of the rotor network, :class:`galinear.nn.GivensNetwork`) is nonlinear: Adam only.

The ``-cf`` methods (shown as LR1*, LR4*, BH1* in reports) are the same modules as lr1, lr4 and
bh1, set to their exact optimum over all training rows from second moments
(:mod:`galinear.compress.fitting.closed_form`: reduced-rank regression, one least-squares solve per
block) instead of being fitted by Adam. They do not depend on the seed. ``rotorlin-m`` is one
linear rotor gadget (``RotorLinear``, no hidden layer, no nonlinearity) fitted by Adam on the
exact mean squared error over all training rows, computed from the same second moments
(:func:`galinear.compress.fitting.closed_form.fit_on_moments`); its initialisation depends on the seed.

``MethodSpec.budget`` (a fraction such as 0.02) matches a method with a knob to a share of each
projection's dense parameters: :func:`build_module` sets the knob, per projection shape, to the
value whose count is closest (:func:`galinear.compress.methods.budgets.closest_setting`); it enters the tag
(``kron-p0.02-...``).

``MethodSpec.objective`` ("qkv" by default) chooses what an Adam-fitted method is fitted to: each
projection's outputs, or (``attention``, ``logits``) the layer's attention output or the model's
next-token distribution with q, k and v fitted jointly (:mod:`galinear.compress.fitting.objective`). It
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
from galinear.compress.methods import records
from galinear.compress.methods.names import (  # noqa: F401  (the names live there; used from here)
    CLOSED_FORM, DISPLAY, KNOBS, METHODS, base_name, display_name,
)
from galinear.compress.methods.records import (  # noqa: F401  (defaults and helpers of the records)
    DEFAULT_KRONECKER_TERMS, DEFAULT_LOW_RANK, block_count, default_blocks,
)

DEFAULT_ROTOR_HIDDEN = records.DEFAULT_HIDDEN


@dataclass(frozen=True)
class MethodSpec:
    """Everything that determines a replacement module and its fit (part of every cache key)."""

    name: str
    epochs: float = 1.0
    lr: float | None = None
    hidden: int | None = DEFAULT_ROTOR_HIDDEN  # the network families (None: the method's default width)
    blocks: int | None = None                  # bh1: None picks the largest divisor <= 48; monarch, bhh:
                                               # None picks default_blocks(...)
    rank: int | None = None                    # lr only (None: DEFAULT_LOW_RANK)
    terms: int | None = None                   # kron only (None: DEFAULT_KRONECKER_TERMS)
    chunk: int | None = None                   # the network families: the gadgets' chunk size, a power of
                                               # two (None: the largest power of two <= both widths)
    budget: float | None = None                # a fraction of each projection's dense parameters: the
                                               # knob (KNOBS) is set per projection to the count closest
                                               # to it (galinear.compress.methods.budgets), overriding the field
    batch_size: int = 256
    max_steps: int | None = None               # set: fit until the validation MSE stops improving
    eval_every: int | None = None              # (galinear.compress.fitting.converge), at most max_steps
    patience: int | None = None
    objective: str = "qkv"                     # "attention" / "logits": q, k, v fitted jointly
                                               # (galinear.compress.fitting.objective)

    def __post_init__(self):
        import math

        if not isinstance(self.name, str) or self.name not in records.RECORDS:
            raise ValueError(f"unknown method {self.name!r}; choose from {', '.join(METHODS)}")
        record = records.RECORDS[self.name]
        for field, optional in (("epochs", False), ("lr", True)):
            value = getattr(self, field)
            if not (optional and value is None) and (isinstance(value, bool) or not isinstance(value, (int, float))
                                                     or not math.isfinite(value) or value <= 0):
                raise ValueError(f"{field} must be a finite number > 0{' or None' if optional else ''}, got {value!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        for knob in ("hidden", "blocks", "rank", "terms", "chunk", "max_steps", "eval_every", "patience"):
            value = getattr(self, knob)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{knob} must be a positive integer or None, got {value!r}")
        for knob in ("rank", "terms", "blocks"):
            if getattr(self, knob) is not None and record.knob != knob:
                raise ValueError(f"{knob} sets the size of {', '.join(records.knob_owners(knob))}; method "
                                 f"{self.name} has no {knob}: drop {knob} for it")
        if self.chunk is not None:
            if record.knob != "chunk":
                raise ValueError(f"chunk sets the gadgets of {' and '.join(records.knob_owners('chunk'))}; method "
                                 f"{self.name} has none: drop chunk for it")
            if self.chunk < 4 or self.chunk & (self.chunk - 1):
                raise ValueError(f"chunk must be a power of two >= 4 (a chunk of 2^n coordinates holds "
                                 f"C(n, 2) planes), got {self.chunk}")
        if self.budget is not None:
            if isinstance(self.budget, bool) or not isinstance(self.budget, (int, float)) or not 0 < self.budget <= 1:
                raise ValueError(f"budget must be a fraction in (0, 1] of the dense parameters (0.02 for 2 %), "
                                 f"got {self.budget!r}")
            if record.budget is None:
                raise ValueError(f"method {self.name} has no size knob, so no budget; budgets apply to "
                                 f"{', '.join(KNOBS)} and their -cf forms")
        if self.objective not in ("qkv", "attention", "logits"):
            raise ValueError(f"spec objective must be qkv, attention or logits, got {self.objective!r}")
        if self.objective != "qkv" and not record.adam_fitted:
            raise ValueError(f"spec objective {self.objective!r} applies to Adam-fitted methods; {self.name} is "
                             "fitted from second moments or has no parameters: use objective='qkv' for it")

    @property
    def method(self) -> records.Method:
        """The method's record (:mod:`galinear.compress.methods.records`)."""
        return records.RECORDS[self.name]

    @property
    def learning_rate(self) -> float:
        return self.method.learning_rate if self.lr is None else self.lr

    @property
    def closed_form(self) -> bool:
        """True for the methods fitted exactly from second moments (no optimiser, no seed)."""
        return self.method.exact

    @property
    def moment_fit(self) -> bool:
        """True for the methods fitted on the second moments of all training rows (closed form or Adam)."""
        return self.method.moment_fit

    def tag(self) -> str:
        """Short unique name of the spec, used in folder names."""
        size = self._size_tag()
        if self.closed_form:
            return self.name + (f"-{size}" if size else "")
        parts = [self.name] + ([size] if size else [])
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

    def _size_tag(self) -> str:
        """The size part of the tag ('' when none; the forms of the first methods are unchanged)."""
        record = self.method
        if self.budget is not None:  # a network's budget sets the chunk at this hidden width
            return f"p{self.budget:g}" + (f"-h{self.hidden or DEFAULT_ROTOR_HIDDEN}" if record.width else "")
        if record.width:
            hidden = self.hidden if self.hidden is not None else record.default_hidden
            return f"h{hidden}" + (f"-c{self.chunk}" if self.chunk is not None else "")
        if record.knob is None:
            return ""
        value = getattr(self, record.knob)
        value = record.knob_default if value is None else value
        return "" if value is None else f"{record.knob_tag}{value}"

    def to_dict(self) -> dict:
        return asdict(self)


def build_module(spec: MethodSpec, d_in: int, d_out: int, bias: bool = False):
    """A freshly initialised replacement for a ``d_in -> d_out`` projection (float32, CPU): the
    builder of the method's record, the knob first set to the budget's on this shape.

    ``bias`` follows the original projection (Qwen2-style q/k/v carry one). Seed torch's
    generator before calling for a reproducible initialisation.
    """
    record = spec.method
    if spec.budget is not None:  # the knob closest to the budget on this projection's shape
        from dataclasses import replace

        from galinear.compress.methods import budgets

        hidden = None
        if record.width:  # the width the module gets (None: the network's default, its input width)
            hidden = spec.hidden if spec.hidden is not None else (record.default_hidden or d_in)
        setting = budgets.closest_setting(record.family, max(1, round(spec.budget * d_in * d_out)), d_in, d_out,
                                          bias, hidden=hidden)
        spec = replace(spec, budget=None, **setting.spec_fields())
    return record.build(spec, d_in, d_out, bias)


def count_parameters(module) -> int:
    """Trainable and fixed parameters of a module: sum of ``p.numel()`` over ``parameters()``."""
    return _util.count_parameters(module)
