r"""One :class:`Method` record per compression method: everything the study, the command line, the
budgets and the reports know of it, in one place.

A record names the method's module **family** (a ``-cf`` form shares its Adam form's family,
module and budget), its **fit** (``adam``; ``closed-form`` from second moments, no optimiser and no
seed; ``moments``, Adam on the exact all-row loss from second moments; ``none`` for a method
without parameters), its Adam **learning rate**, its **builder** (a :class:`MethodSpec
<galinear.compress.methods.catalogue.MethodSpec>` whose budget is resolved, the widths and the bias
to a fresh module), its **size knob** (the MethodSpec field that sets its size, how the knob enters
the cache tag) with its **budget rule** (:class:`Budget`: parameters, multiply-adds per token and
the knob values the module accepts), its **report colour**, the **command-line options** that apply
to it, its closed-form counterpart (``--baseline-fit``) and the estimated cost of one fit (for
dealing units out over ranks).

Adding a method is one record here and its builder; :data:`RECORDS` is read by
:mod:`~galinear.compress.methods.catalogue` (MethodSpec, build_module), :mod:`~galinear.compress.methods.budgets`,
:mod:`galinear.compress.study.config` (the spec of a study's method), the checks of ``galinear
compress`` and every report and plot. torch and galinear.nn load when a module is built.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

#: the hidden width of the network families when none is given
DEFAULT_HIDDEN = 512
DEFAULT_LOW_RANK = 4
DEFAULT_KRONECKER_TERMS = 4
#: the smallest chunk offered by a budget (2^2 coordinates: one plane per side)
MIN_CHUNK = 4
#: the networks' shape in the study: 2 hidden layers, breadth 3
HIDDEN_LAYERS, BREADTH = 2, 3

#: the kinds of fit
ADAM, CLOSED_FORM, MOMENTS, NO_FIT = "adam", "closed-form", "moments", "none"

#: the command-line option of each MethodSpec size field: (option, StudyConfig field, MethodSpec field)
OPTION_FIELDS = (("--hidden", "hidden", "hidden"), ("--chunk", "chunk", "chunk"), ("--rank", "rank", "rank"),
                 ("--terms", "terms", "terms"), ("--bh-blocks", "bh_blocks", "blocks"), ("--budget", "budget", "budget"))


@dataclass(frozen=True)
class Budget:
    """The budget rule of a family with a size knob, on a ``d_in -> d_out`` projection:
    ``parameters(value, d_in, d_out, bias, hidden)``, ``flops(value, d_in, d_out, hidden)``
    (multiply-adds per token, the module applied in factored form, bias not counted) and
    ``settings(d_in, d_out, hidden)`` (every knob value the module accepts). ``hidden`` is the
    width of a network family, ignored by the others."""

    parameters: Callable[..., int]
    flops: Callable[..., int]
    settings: Callable[..., list]


@dataclass(frozen=True)
class Method:
    """One compression method (module doc). ``knob``: the MethodSpec field that sets its size, shown
    in the cache tag as ``knob_tag`` + value (``knob_default`` when unset); ``width``: a network
    family whose knob is the chunk at a hidden width (``--hidden``; ``default_hidden`` when unset,
    None: the network's own default, its input width); ``options``: the size options of ``galinear
    compress`` that apply to it; ``closed_form``: the name of its closed-form fit, if any;
    ``summary``: what it is, in the help of ``--methods``."""

    name: str
    family: str
    fit: str
    learning_rate: float
    build: Callable
    colour: str
    display: str | None = None
    knob: str | None = None
    knob_tag: str = ""
    knob_default: int | None = None
    budget: Budget | None = None
    width: bool = False
    default_hidden: int | None = DEFAULT_HIDDEN
    options: tuple = ()
    closed_form: str | None = None
    cost: float = 1.0
    summary: str = ""

    @property
    def adam_fitted(self) -> bool:
        """Fitted by Adam on captured rows (what --objective, --epochs and the stopping rule apply to)."""
        return self.fit == ADAM

    @property
    def exact(self) -> bool:
        """Set exactly from second moments: no optimiser, no seed."""
        return self.fit == CLOSED_FORM

    @property
    def moment_fit(self) -> bool:
        """Fitted on the second moments of all training rows (exactly or by Adam)."""
        return self.fit in (CLOSED_FORM, MOMENTS)

    @property
    def shown(self) -> str:
        """The name in reports (LR1*, ... for the closed forms)."""
        return self.display or self.name


# ------------------------------------------------------------------------------------------ builders
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


def default_blocks(name: str, d_in: int, d_out: int) -> int:
    """Default block count of monarch (the common divisor of both widths nearest sqrt(d_in)) or
    bhh (the largest power of two <= 64 dividing d_out and <= d_in): 24 and 64 for SmolLM2."""
    if method(name).family == "monarch":
        common = [b for b in range(1, min(d_in, d_out) + 1) if d_in % b == 0 and d_out % b == 0]
        return min(common, key=lambda b: (abs(b * b - d_in), b))
    b = 1
    while b * 2 <= min(64, d_in) and d_out % (b * 2) == 0:
        b *= 2
    return b


def _nn(name: str):
    from galinear import nn

    return getattr(nn, name)


def _build_dense(spec, d_in, d_out, bias):
    import torch

    return torch.nn.Linear(d_in, d_out, bias=bias)


def _build_zero(spec, d_in, d_out, bias):
    return _zero_projection_class()(d_in, d_out, bias=bias)


def _build_rotor(spec, d_in, d_out, bias):
    return _nn("RotorNetwork")(d_in, d_out, hidden=spec.hidden, chunk_size=spec.chunk, bias=bias)


def _build_givens(spec, d_in, d_out, bias):
    return _nn("GivensNetwork")(d_in, d_out, hidden=spec.hidden or DEFAULT_HIDDEN, chunk_size=spec.chunk, bias=bias)


def _build_rotor_linear(spec, d_in, d_out, bias):
    return _nn("RotorLinear")(d_in, d_out, bias=bias)


def _low_rank(fixed: int | None):
    def build(spec, d_in, d_out, bias):
        rank = fixed if fixed is not None else spec.rank or DEFAULT_LOW_RANK
        if spec.rank is not None and rank > min(d_in, d_out):
            raise ValueError(f"rank {rank} is more than min(d_in, d_out) = {min(d_in, d_out)} of a {d_in} -> {d_out} "
                             f"projection, the largest rank it has; choose rank {min(d_in, d_out)} or less")
        return _nn("LowRankLinear")(d_in, d_out, rank=rank, bias=bias)

    return build


def _build_kron(spec, d_in, d_out, bias):
    if spec.terms is None:  # the default, capped at the most independent terms of the default factors
        (m1, n1), (m2, n2) = kronecker_factors(d_in, d_out)
        return _nn("KroneckerSumLinear")(d_in, d_out, terms=min(DEFAULT_KRONECKER_TERMS, m1 * n1, m2 * n2), bias=bias)
    return _nn("KroneckerSumLinear")(d_in, d_out, terms=spec.terms, bias=bias)


def _blocked(cls: str):
    def build(spec, d_in, d_out, bias):
        return _nn(cls)(d_in, d_out, blocks=spec.blocks or default_blocks(spec.name, d_in, d_out), bias=bias)

    return build


def _build_bh1(spec, d_in, d_out, bias):
    return _nn("BlockHadamardLinear")(d_in, d_out, blocks=block_count(d_in, d_out, spec.blocks), depth=1, bias=bias)


def _build_butterfly(spec, d_in, d_out, bias):
    from galinear.compress.methods.butterfly import ButterflyNetwork

    return ButterflyNetwork(d_in, d_out, hidden=spec.hidden or DEFAULT_HIDDEN, chunk_size=spec.chunk, bias=bias)


# ---------------------------------------------------------------------------------------- budget rules
def kronecker_factors(d_in, d_out):
    from galinear.nn.structured import default_kronecker_factors

    return default_kronecker_factors(d_in, d_out)


def _divisors(d_in, d_out, hidden=None):
    return [b for b in range(1, min(d_in, d_out) + 1) if d_in % b == 0 and d_out % b == 0]


def _same_flops(parameters):
    """Multiply-adds equal to the parameters without a bias."""
    return lambda value, d_in, d_out, hidden=None: parameters(value, d_in, d_out, False)


def _lr_parameters(value, d_in, d_out, bias=False, hidden=None):
    return value * (d_in + d_out) + (d_out if bias else 0)


def _bh1_parameters(value, d_in, d_out, bias=False, hidden=None):
    return value * -(-d_out // value) * -(-d_in // value) + (d_out if bias else 0)


def _kron_parameters(value, d_in, d_out, bias=False, hidden=None):
    from galinear.nn.structured import kronecker_sum_parameters

    return kronecker_sum_parameters(d_in, d_out, value, bias)


def _kron_flops(value, d_in, d_out, hidden=None):
    (m1, n1), (m2, n2) = kronecker_factors(d_in, d_out)
    return value * n1 * m2 * (n2 + m1)


def _kron_settings(d_in, d_out, hidden=None):
    (m1, n1), (m2, n2) = kronecker_factors(d_in, d_out)
    return list(range(1, min(m1 * n1, m2 * n2) + 1))


def _monarch_parameters(value, d_in, d_out, bias=False, hidden=None):
    return d_out * d_in // value + d_out * value + (d_out if bias else 0)


def _bhh_parameters(value, d_in, d_out, bias=False, hidden=None):
    return d_out * -(-d_in // value) + (d_out if bias else 0)


def _chunk(d_in, d_out, chunk=None):
    """A gadget's chunk: ``chunk`` capped at the largest power of two <= both widths."""
    cap = 1 << (min(d_in, d_out).bit_length() - 1)
    return cap if chunk is None else min(chunk, cap)


def network_gadgets(d_in, d_out, hidden):
    """(in, out) of a network's gadgets at hidden width ``hidden``."""
    return [(d_in, hidden)] + [(hidden, hidden)] * (HIDDEN_LAYERS * BREADTH) + [(hidden, d_out)]


def network_budget(pair_parameters: Callable[[int], int], pair_flops: Callable[[int], int]) -> Budget:
    """The budget rule of a network family (the rotor network's shape: gadgets of chunk pairs, one
    PReLU, branch weights) whose chunk pair of c coordinates holds ``pair_parameters(c)`` parameters
    besides its alpha and costs ``pair_flops(c)`` multiply-adds per token; the knob is the chunk."""

    def pairs(a, b, chunk):
        c = _chunk(a, b, chunk)
        return -(-a // c) * -(-b // c), c

    def parameters(value, d_in, d_out, bias=False, hidden=DEFAULT_HIDDEN):
        total = 1 + HIDDEN_LAYERS * BREADTH  # the PReLU and the branch weights
        for a, b in network_gadgets(d_in, d_out, hidden):
            count, c = pairs(a, b, value)
            total += count * (pair_parameters(c) + 1) + (b if bias else 0)
        return total

    def flops(value, d_in, d_out, hidden=DEFAULT_HIDDEN):
        return sum(count * pair_flops(c) for count, c in (pairs(a, b, value) for a, b in network_gadgets(d_in, d_out, hidden)))

    def settings(d_in, d_out, hidden=DEFAULT_HIDDEN):
        largest = max(_chunk(a, b) for a, b in network_gadgets(d_in, d_out, hidden))
        return [1 << k for k in range(MIN_CHUNK.bit_length() - 1, largest.bit_length())]

    return Budget(parameters, flops, settings)


def _planes(c: int) -> int:
    """n (n - 1): a double rotor's bivector coefficients (or the Givens layers) of a chunk c = 2^n."""
    n = c.bit_length() - 1
    return n * (n - 1)


LR_BUDGET = Budget(_lr_parameters, _same_flops(_lr_parameters), lambda d_in, d_out, hidden=None: list(range(1, min(d_in, d_out) + 1)))
BH1_BUDGET = Budget(_bh1_parameters, _same_flops(_bh1_parameters), _divisors)
KRON_BUDGET = Budget(_kron_parameters, _kron_flops, _kron_settings)
MONARCH_BUDGET = Budget(_monarch_parameters, _same_flops(_monarch_parameters), _divisors)
BHH_BUDGET = Budget(_bhh_parameters,
                    lambda value, d_in, d_out, hidden=None: _bhh_parameters(value, d_in, d_out) + d_out * int(math.log2(value)),
                    lambda d_in, d_out, hidden=None: [2**i for i in range(d_out.bit_length())
                                                      if d_out % 2**i == 0 and 2**i <= d_in])
#: per chunk pair and side k = n // 2 simple rotors cos + sin u w: 2 k (2 n + 1) c multiply-adds a pair
ROTOR_BUDGET = network_budget(_planes, lambda c: 2 * ((c.bit_length() - 1) // 2) * (2 * c.bit_length() - 1) * c)
#: G = n (n - 1) Givens layers a pair, 4 multiplies per rotation: 2 G c
GIVENS_BUDGET = network_budget(_planes, lambda c: 2 * _planes(c) * c)


# ------------------------------------------------------------------------------------------- records
def _methods() -> dict:
    network = ("--hidden", "--chunk", "--budget")
    adam = [
        Method("rotor", "rotor", ADAM, 0.05, _build_rotor, "tab:red", knob="chunk", budget=ROTOR_BUDGET, width=True,
               default_hidden=None, options=network, cost=20.0, summary="the rotor network"),
        Method("lr1", "lr1", ADAM, 0.05, _low_rank(1), "tab:blue", closed_form="lr1-cf", summary="rank 1"),
        Method("lr4", "lr4", ADAM, 0.05, _low_rank(4), "tab:cyan", closed_form="lr4-cf", summary="rank 4"),
        Method("bh1", "bh1", ADAM, 0.01, _build_bh1, "tab:green", knob="blocks", knob_tag="b", budget=BH1_BUDGET,
               options=("--bh-blocks", "--budget"), closed_form="bh1-cf", summary="block-Hadamard, --bh-blocks blocks"),
        Method("dense", "dense", ADAM, 0.01, _build_dense, "tab:gray", summary="a fresh dense matrix"),
        Method("zero", "zero", NO_FIT, 0.0, _build_zero, "tab:brown", summary="outputs 0"),
        Method("rotorlin-m", "rotorlin-m", MOMENTS, 0.05, _build_rotor_linear, "maroon",
               display="RotorLinear (moments)", summary="one rotor gadget fitted on second moments"),
        Method("lr", "lr", ADAM, 0.05, _low_rank(None), "tab:blue", knob="rank", knob_tag="r",
               knob_default=DEFAULT_LOW_RANK, budget=LR_BUDGET, options=("--rank", "--budget"), closed_form="lr-cf",
               summary="rank --rank"),
        Method("kron", "kron", ADAM, 0.01, _build_kron, "tab:orange", knob="terms", knob_tag="t",
               knob_default=DEFAULT_KRONECKER_TERMS, budget=KRON_BUDGET, options=("--terms", "--budget"),
               closed_form="kron-cf", summary="Kronecker sum of --terms terms"),
        Method("monarch", "monarch", ADAM, 0.01, _blocked("MonarchLinear"), "tab:olive", knob="blocks", knob_tag="b",
               budget=MONARCH_BUDGET, options=("--budget",), closed_form="monarch-cf", summary="Monarch"),
        Method("bhh", "bhh", ADAM, 0.01, _blocked("MixedBlockHadamardLinear"), "tab:pink", knob="blocks",
               knob_tag="b", budget=BHH_BUDGET, options=("--budget",), closed_form="bhh-cf",
               summary="Hadamard-mixed power-of-two blocks"),
        Method("givens", "givens", ADAM, 0.05, _build_givens, "tab:purple", knob="chunk", budget=GIVENS_BUDGET,
               width=True, options=network, cost=20.0, summary="the orthogonal control with the rotor network's shape"),
        # the butterfly network: the rotor network with every chunk map a Butterfly (n/2 log2 n angles)
        Method("butterfly", "butterfly", ADAM, 0.05, _build_butterfly, "goldenrod", knob="chunk",
               budget=network_budget(lambda c: (c // 2) * (c.bit_length() - 1), lambda c: 2 * (c.bit_length() - 1) * c),
               width=True, options=network, cost=20.0,
               summary="the rotor network's shape with a butterfly of Givens rotations for every chunk map"),
    ]
    shown = {"lr1": "LR1*", "lr4": "LR4*", "bh1": "BH1*", "lr": "LR*", "kron": "Kron*", "monarch": "Monarch*",
             "bhh": "BHH*"}
    exact = [replace(m, name=m.closed_form, fit=CLOSED_FORM, learning_rate=0.0, display=shown[m.name],
                     closed_form=None) for m in adam if m.closed_form]
    order = ("rotor", "lr1", "lr4", "bh1", "dense", "zero", "lr1-cf", "lr4-cf", "bh1-cf", "rotorlin-m", "lr", "kron",
             "monarch", "bhh", "givens", "lr-cf", "kron-cf", "monarch-cf", "bhh-cf", "butterfly")
    every = {m.name: m for m in adam + exact}
    return {name: every[name] for name in order}


#: every method's record, in the order of ``galinear compress --help``
RECORDS: dict[str, Method] = _methods()


def method(name: str) -> Method:
    """The record of method ``name``; ValueError for an unknown name."""
    try:
        return RECORDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(RECORDS)}") from None


def colour(name: str, default: str = "black") -> str:
    """The report colour of a method (a closed form shares its Adam fit's), ``default`` for another name."""
    return RECORDS[name].colour if name in RECORDS else default


def display_name(name: str) -> str:
    """Name of a method in reports: LR1*, LR4*, BH1* for the closed-form fits, else the name."""
    return RECORDS[name].shown if name in RECORDS else name


def base_name(name: str) -> str:
    """The module family of a method: 'lr1-cf' -> 'lr1' (a name without a record: itself less -cf)."""
    return RECORDS[name].family if name in RECORDS else name.removesuffix("-cf")


def knob_owners(knob: str) -> list:
    """["lr and lr-cf", ...]: the methods whose size ``knob`` sets, family by family."""
    families: dict = {}
    for m in RECORDS.values():
        if m.knob == knob:
            families.setdefault(m.family, []).append(m.name)
    return [" and ".join(names) for names in families.values()]


def owners(option: str) -> list:
    """The names of the methods that ``option`` of ``galinear compress`` applies to."""
    return [m.name for m in RECORDS.values() if option in m.options]


def methods_help() -> str:
    """The help of ``--methods``: every method with its summary; the closed forms by their suffix."""
    named = "; ".join(f"{m.name} ({m.summary})" for m in RECORDS.values() if not m.exact)
    exact = ", ".join(m.name for m in RECORDS.values() if m.exact)
    return f"comma-separated from {named}; a -cf suffix ({exact}) is the closed-form fit"


def sized_families() -> dict:
    """{family: knob} of every family with a size knob (what a budget applies to)."""
    return {m.family: m.knob for m in RECORDS.values() if m.knob is not None}


__all__ = ["ADAM", "CLOSED_FORM", "MOMENTS", "NO_FIT", "DEFAULT_HIDDEN", "DEFAULT_LOW_RANK", "DEFAULT_KRONECKER_TERMS",
           "MIN_CHUNK", "HIDDEN_LAYERS", "BREADTH", "OPTION_FIELDS", "Budget", "Method", "RECORDS", "method", "colour",
           "display_name", "base_name", "knob_owners", "owners", "methods_help", "sized_families", "network_budget", "network_gadgets",
           "block_count", "default_blocks", "kronecker_factors"]
