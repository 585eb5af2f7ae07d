"""Parameter budgets: every method's size, cost per token, and the setting closest to a budget.

Each method with a size knob (``methods.KNOBS``: the rank of ``lr``, the blocks of ``bh1``,
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

import math
from dataclasses import dataclass

from galinear.compress.methods import names as method_names

#: SmolLM2-135M's q, k, v projections (d_in, d_out)
SMOLLM2_QKV = {"q_proj": (576, 576), "k_proj": (576, 192), "v_proj": (576, 192)}
#: the budgets of the study, as fractions of the dense q/k/v parameters
FRACTIONS = (0.005, 0.02, 0.08)
#: the hidden width of the rotor network and its control when a budget sets their chunk
DEFAULT_HIDDEN = 512
#: the smallest chunk offered (2^2 coordinates: one plane per side)
MIN_CHUNK = 4
#: the rotor network's shape in the study (methods.build_module): 2 hidden layers, breadth 3
HIDDEN_LAYERS, BREADTH = 2, 3


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


def _chunk(d_in, d_out, chunk=None):
    """A gadget's chunk: ``chunk`` capped at the largest power of two <= both widths."""
    cap = 1 << (min(d_in, d_out).bit_length() - 1)
    return cap if chunk is None else min(chunk, cap)


def _gadgets(d_in, d_out, hidden):
    """(in, out) of the network's gadgets."""
    return [(d_in, hidden)] + [(hidden, hidden)] * (HIDDEN_LAYERS * BREADTH) + [(hidden, d_out)]


def _gadget_size(a, b, chunk=None):
    c = _chunk(a, b, chunk)
    n = c.bit_length() - 1
    pairs = -(-a // c) * -(-b // c)
    return pairs, c, n * (n - 1)  # pairs, chunk, rotor (or Givens) parameters per pair (double rotor)


def kronecker_factors(d_in, d_out):
    from galinear.nn.structured import default_kronecker_factors

    return default_kronecker_factors(d_in, d_out)


def parameters(method: str, value: int | None, d_in: int, d_out: int, bias: bool = False,
               hidden: int = DEFAULT_HIDDEN) -> int:
    """Parameter count of ``method`` (its base name) with knob ``value`` on ``d_in -> d_out``.

    For rotor and givens ``value`` is the chunk size (None: the largest that fits each gadget) and
    ``hidden`` the width.
    """
    base = method_names.base_name(method)
    extra = d_out if bias else 0
    if base == "lr":
        return value * (d_in + d_out) + extra
    if base == "bh1":
        return value * -(-d_out // value) * -(-d_in // value) + extra
    if base == "kron":
        from galinear.nn.structured import kronecker_sum_parameters

        return kronecker_sum_parameters(d_in, d_out, value, bias)
    if base == "monarch":
        return d_out * d_in // value + d_out * value + extra
    if base == "bhh":
        return d_out * -(-d_in // value) + extra
    if base in ("rotor", "givens"):
        total = 1 + HIDDEN_LAYERS * BREADTH  # the PReLU and the branch weights
        for a, b in _gadgets(d_in, d_out, hidden):
            pairs, _, per_pair = _gadget_size(a, b, value)
            total += pairs * (per_pair + 1) + (b if bias else 0)
        return total
    raise ValueError(f"method {method!r} has no size knob; choose from {', '.join(method_names.KNOBS)}")


def flops_per_token(method: str, value: int | None, d_in: int, d_out: int, hidden: int = DEFAULT_HIDDEN) -> int:
    """Multiply-adds per token (the methods table), every method applied in factored form.

    The rotor network: per chunk pair of c = 2^n and per side, k = n // 2 simple rotors
    cos + sin u w (u, w vectors; a product by a vector is n signed permutations of the c
    coefficients): k (2 n + 1) c, two sides. The Givens control: 2 G c per pair (G = n (n - 1)
    layers, 4 multiplies per rotation). LayerNorm and PReLU are not counted. As matrices (how both
    run in training on the CPU) a pair costs c^2 instead.
    """
    base = method_names.base_name(method)
    if base in ("lr", "bh1", "monarch"):
        return parameters(base, value, d_in, d_out)
    if base == "kron":
        (m1, n1), (m2, n2) = kronecker_factors(d_in, d_out)
        return value * n1 * m2 * (n2 + m1)
    if base == "bhh":
        return parameters(base, value, d_in, d_out) + d_out * int(math.log2(value))
    if base in ("rotor", "givens"):
        total = 0
        for a, b in _gadgets(d_in, d_out, hidden):
            pairs, c, per_pair = _gadget_size(a, b, value)
            n = c.bit_length() - 1
            total += pairs * (2 * (n // 2) * (2 * n + 1) * c if base == "rotor" else 2 * per_pair * c)
        return total
    raise ValueError(f"method {method!r} has no size knob; choose from {', '.join(method_names.KNOBS)}")


def settings(method: str, d_in: int, d_out: int, hidden: int = DEFAULT_HIDDEN) -> list[int]:
    """Every knob value the method's module accepts on ``d_in -> d_out`` (chunk sizes: the powers of
    two from MIN_CHUNK up to the largest any gadget at width ``hidden`` fits)."""
    base = method_names.base_name(method)
    if base == "lr":
        return list(range(1, min(d_in, d_out) + 1))
    if base in ("bh1", "monarch"):
        return [b for b in range(1, min(d_in, d_out) + 1) if d_in % b == 0 and d_out % b == 0]
    if base == "kron":
        (m1, n1), (m2, n2) = kronecker_factors(d_in, d_out)
        return list(range(1, min(m1 * n1, m2 * n2) + 1))
    if base == "bhh":
        return [2**i for i in range(d_out.bit_length()) if d_out % 2**i == 0 and 2**i <= d_in]
    if base in ("rotor", "givens"):
        largest = max(_chunk(a, b) for a, b in _gadgets(d_in, d_out, hidden))
        return [1 << k for k in range(MIN_CHUNK.bit_length() - 1, largest.bit_length())]
    raise ValueError(f"method {method!r} has no size knob; choose from {', '.join(method_names.KNOBS)}")


def closest_setting(method: str, budget: int, d_in: int, d_out: int, bias: bool = False,
                    hidden: int | None = None) -> Setting:
    """The knob value whose parameter count is nearest ``budget`` (ties: the smaller count).

    ``hidden`` is the width of rotor and givens (default DEFAULT_HIDDEN), whose knob is the chunk.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive number of parameters, got {budget!r}")
    base = method_names.base_name(method)
    width = {"hidden": DEFAULT_HIDDEN if hidden is None else hidden} if base in ("rotor", "givens") else {}

    def distance(value):
        count = parameters(base, value, d_in, d_out, bias, **width)
        return abs(count - budget), count

    best = min(settings(base, d_in, d_out, **width), key=distance)
    return Setting(method, method_names.KNOBS[base], best, parameters(base, best, d_in, d_out, bias, **width),
                   flops_per_token(base, best, d_in, d_out, **width), budget)


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
    for name in names or method_names.KNOBS:
        out[name] = {proj: closest_setting(name, max(1, round(fraction * d_in * d_out)), d_in, d_out, bias, hidden)
                     for proj, (d_in, d_out) in shapes.items()}
    return out


__all__ = ["Setting", "SMOLLM2_QKV", "FRACTIONS", "DEFAULT_HIDDEN", "MIN_CHUNK", "parameters", "flops_per_token", "settings",
           "closest_setting", "matched_settings"]
