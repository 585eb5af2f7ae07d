"""Parameter budgets: every method's size, cost per token, and the setting closest to a budget.

Each method with a size knob (its record's budget rule, :mod:`galinear.compress.methods.records`: the rank of ``lr``, the blocks of ``bh1``,
``monarch`` and ``bhh``, the Kronecker terms of ``kron``, the chunk size of ``rotor`` and
``givens`` at their hidden width) has a closed formula for its parameter count and its multiply-adds per token on a
``d_in -> d_out`` projection (the table in :mod:`galinear.compress.methods.catalogue`); the tests check the
counts against the modules. :func:`closest_setting` picks the knob value whose count is nearest a
budget, :func:`matched_settings` does so for every method and projection at a fraction of the
dense parameters::

    from galinear.compress.methods import budgets
    budgets.matched_settings(0.02)["kron"]["q_proj"]   # Setting(method='kron', knob='terms', value=6, ...)
    budgets.matched_settings(0.02)["rotor"]["q_proj"]  # knob='chunk' at hidden width 512

The classes cannot reach every budget: Monarch has at least 2 d^1.5 parameters (8.3 % of SmolLM2's
q/k/v), ``bhh`` at most 64 power-of-two blocks there (1.6 % at least), and the rotor network and its
control reach their budgets by smaller chunks at a fixed hidden width (``hidden=``, default 512:
the matrix form's cost per token does not change with the chunk, while the width multiplies it);
``Setting.relative`` says how far the closest setting lies from the budget.
"""
from __future__ import annotations

from dataclasses import dataclass

from galinear.compress.methods import records
from galinear.compress.methods.records import (  # noqa: F401  (the networks' shape, read from here too)
    BREADTH, DEFAULT_HIDDEN, HIDDEN_LAYERS, MIN_CHUNK, kronecker_factors,
)

#: SmolLM2-135M's q, k, v projections (d_in, d_out)
SMOLLM2_QKV = {"q_proj": (576, 576), "k_proj": (576, 192), "v_proj": (576, 192)}
#: the budgets of the study, as fractions of the dense q/k/v parameters
FRACTIONS = (0.005, 0.02, 0.08)


@dataclass(frozen=True)
class Setting:
    """One method at one size on one projection shape."""

    method: str
    knob: str
    value: int
    parameters: int
    flops: int
    budget: int

    @property
    def relative(self) -> float:
        """(parameters - budget) / budget."""
        return (self.parameters - self.budget) / self.budget

    def spec_fields(self) -> dict:
        """The MethodSpec field that selects this size, e.g. {'terms': 6}."""
        return {self.knob: self.value}


def _rule(method: str) -> records.Method:
    """The record of ``method`` when it has a budget rule, else ValueError."""
    record = records.RECORDS.get(method) if isinstance(method, str) else None
    if record is None or record.budget is None:
        raise ValueError(f"method {method!r} has no size knob; choose from {', '.join(records.sized_families())}")
    return record


def _width(record: records.Method, hidden: int | None) -> dict:
    return {"hidden": DEFAULT_HIDDEN if hidden is None else hidden} if record.width else {}


def parameters(method: str, value: int | None, d_in: int, d_out: int, bias: bool = False,
               hidden: int = DEFAULT_HIDDEN) -> int:
    """Parameter count of ``method`` with knob ``value`` on ``d_in -> d_out`` (its record's budget rule).

    For the network families ``value`` is the chunk size (None: the largest that fits each gadget)
    and ``hidden`` the width.
    """
    return _rule(method).budget.parameters(value, d_in, d_out, bias, hidden)


def flops_per_token(method: str, value: int | None, d_in: int, d_out: int, hidden: int = DEFAULT_HIDDEN) -> int:
    """Multiply-adds per token (the methods table), every method applied in factored form.

    The rotor network: per chunk pair of c = 2^n and per side, k = n // 2 simple rotors
    cos + sin u w (u, w vectors; a product by a vector is n signed permutations of the c
    coefficients): k (2 n + 1) c, two sides. The Givens control: 2 G c per pair (G = n (n - 1)
    layers, 4 multiplies per rotation). LayerNorm and PReLU are not counted. As matrices (how both
    run in training on the CPU) a pair costs c^2 instead.
    """
    return _rule(method).budget.flops(value, d_in, d_out, hidden)


def settings(method: str, d_in: int, d_out: int, hidden: int = DEFAULT_HIDDEN) -> list[int]:
    """Every knob value the method's module accepts on ``d_in -> d_out`` (chunk sizes: the powers of
    two from MIN_CHUNK up to the largest any gadget at width ``hidden`` fits)."""
    return _rule(method).budget.settings(d_in, d_out, hidden)


def closest_setting(method: str, budget: int, d_in: int, d_out: int, bias: bool = False,
                    hidden: int | None = None) -> Setting:
    """The knob value whose parameter count is nearest ``budget`` (ties: the smaller count).

    ``hidden`` is the width of the network families (default DEFAULT_HIDDEN), whose knob is the chunk.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive number of parameters, got {budget!r}")
    record = _rule(records.base_name(method) if isinstance(method, str) else method)
    rule, width = record.budget, _width(record, hidden)

    def distance(value):
        count = rule.parameters(value, d_in, d_out, bias, **width)
        return abs(count - budget), count

    best = min(rule.settings(d_in, d_out, **width), key=distance)
    return Setting(method, record.knob, best, rule.parameters(best, d_in, d_out, bias, **width),
                   rule.flops(best, d_in, d_out, **width), budget)


def matched_settings(fraction: float, shapes=None, names=None, bias: bool = False,
                     hidden: int | None = None) -> dict:
    """{method: {projection: Setting}} at ``fraction`` of each projection's dense parameters.

    ``shapes`` maps projection names to (d_in, d_out) (default SmolLM2's q/k/v); ``names`` the
    methods (default every method with a knob). Each projection gets its own share, so the q/k/v
    total is matched too.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r} (0.02 is 2 % of the dense parameters)")
    shapes = SMOLLM2_QKV if shapes is None else shapes
    out = {}
    for name in names or records.sized_families():
        out[name] = {proj: closest_setting(name, max(1, round(fraction * d_in * d_out)), d_in, d_out, bias, hidden)
                     for proj, (d_in, d_out) in shapes.items()}
    return out


__all__ = ["Setting", "SMOLLM2_QKV", "FRACTIONS", "DEFAULT_HIDDEN", "MIN_CHUNK", "parameters", "flops_per_token", "settings",
           "closest_setting", "matched_settings"]
