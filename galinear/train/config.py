"""The settings of a training run: :class:`MLPConfig` (architecture) and :class:`TrainConfig` (optimiser).

Their defaults are the measured configuration of docs/results.md (width 1024, depth 2, GELU,
rotor chunk 128 on the dense sandwich backend, bivectors drawn from N(0, 1); AdamW, 10 epochs of
batch 256, peak learning rate 7e-3 after 50 warm-up steps). ``galinear train-mlp`` reads its
command-line defaults from these fields, so they are written only here.

Plain Python (no torch import): the command line imports this module to build its parser.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["MLPConfig", "TrainConfig", "MODEL_KINDS", "ACTIVATIONS", "HEADS", "ROTOR_GRADIENTS", "check_decay",
           "largest_chunk", "SEED_LIMIT", "check_seed"]

#: Largest training seed: torch.manual_seed and numpy's generators take every integer in 0..2**64 - 1.
SEED_LIMIT = 2**64 - 1

MODEL_KINDS = ("dense", "rotor", "lowrank")
ACTIVATIONS = ("relu", "gelu", "prelu", "tanh")
HEADS = ("dense", "rotor")
ROTOR_GRADIENTS = ("exact", "power-step")


def check_decay(lr: float, weight_decay: float, lr_flag: str = "--lr") -> None:
    """Refuse a decoupled weight decay that the step alone makes diverge: AdamW multiplies every decayed
    weight by 1 - lr x weight_decay at each step (lr the peak rate), so from lr x weight_decay >= 1 the
    weights are zeroed or flip sign every step and grow without bound past 2."""
    if weight_decay > 0 and lr * weight_decay >= 1:
        raise ValueError(f"--weight-decay {weight_decay:g} with {lr_flag} {lr:g}: each AdamW step multiplies every "
                         f"decayed weight by 1 - {lr_flag.lstrip('-')} x weight_decay = {1 - lr * weight_decay:g}, so "
                         f"the decay alone destroys the weights; choose --weight-decay below 1 / {lr_flag.lstrip('-')} "
                         f"= {1 / lr:g} (usually 0 to 0.1), or a lower {lr_flag}")


def check_seed(seed, name: str = "seed") -> None:
    """``seed`` is an integer in 0..SEED_LIMIT (2**64 - 1)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_LIMIT:
        raise ValueError(f"{name} must be an integer in 0..2**64 - 1 (what torch.manual_seed takes), got {seed!r}")


def largest_chunk(widths) -> int:
    """The largest rotor chunk any map of ``widths`` ((d_in, d_out) pairs) uses: each map caps its chunks
    at the largest power of two <= both its widths, so a larger chunk size runs as this one."""
    return max(1 << (min(a, b).bit_length() - 1) for a, b in widths)


@dataclass
class MLPConfig:
    """Architecture of one MLP (built by :func:`galinear.train.models.build_mlp`).

    Parameters
    ----------
    kind : {"dense", "rotor", "lowrank"}
        Which linear map the hidden layers use.
    in_features, num_classes : int
        784 and 10 for (Fashion-)MNIST.
    hidden : int
        Width of every hidden layer (a power of two suits rotor layers: a single chunk of
        n = log2(hidden) basis vectors).
    depth : int
        Number of hidden layers (linear map + norm + activation), at least 1.
    layer_norm : bool
        LayerNorm without affine parameters after every hidden linear map.
    activation : {"relu", "gelu", "prelu", "tanh"}
        "prelu" is one slope shared by the whole network (one parameter, as in the paper).
    bias : bool
        Biases in the hidden linear maps.
    head : {"dense", "rotor"}
        The last map hidden -> classes.
    rank : int
        Rank of the low-rank maps (kind "lowrank").
    chunk_size : int or None
        Rotor chunk size, a power of two, capped per layer at the largest power of two <= both
        widths of that layer (None: that cap, i.e. RotorLinear's default). The default 128 is
        Cl(7): 21 bivector coefficients per rotor.
    backend : str
        Rotor sandwich backend passed to RotorLinear ("auto" picks the fastest registered). The
        default "dense" builds the chunk matrices once per step, which for n <= 10 and batches of
        hundreds costs less CPU than the factored kernels (docs/results.md).
    rotor_init_std : float or None
        Standard deviation of the normal initialisation of every bivector coefficient of the
        rotor maps (None keeps RotorLinear's default). A larger value starts from rotations far
        from the identity, so that every hidden unit mixes many inputs from the first step.
    dropout : float
        Probability of dropping a hidden unit after each activation in training.
    rotor_gradient : str
        ``gradient`` of every RotorLinear: "exact" (default, the derivative of exp(B)) or
        "power-step" (the paper's one-step approximation, for comparisons).
    """

    kind: str = "dense"
    in_features: int = 784
    num_classes: int = 10
    hidden: int = 1024
    depth: int = 2
    layer_norm: bool = True
    activation: str = "gelu"
    bias: bool = True
    head: str = "dense"
    rank: int = 4
    chunk_size: int | None = 128
    backend: str = "dense"
    rotor_init_std: float | None = 1.0
    dropout: float = 0.0
    rotor_gradient: str = "exact"

    def validate(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; choose one of {MODEL_KINDS}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose one of {ACTIVATIONS}")
        if self.head not in HEADS:
            raise ValueError(f"unknown head {self.head!r}; choose 'dense' or 'rotor'")
        for name in ("in_features", "num_classes", "hidden", "depth", "rank"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.rotor_gradient not in ROTOR_GRADIENTS:
            raise ValueError(f"rotor_gradient must be 'exact' or 'power-step', got {self.rotor_gradient!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {self.dropout!r}")
        chunk = self.chunk_size
        if chunk is not None and (not isinstance(chunk, int) or chunk < 1 or chunk & (chunk - 1)):
            raise ValueError(f"chunk_size must be a power of two (4, 8, 16, ...) or None, got {chunk!r}")
        # a chunk of 2**n coordinates holds a rotor of Cl(n): below 4 there is no bivector to learn
        if (self.kind == "rotor" or self.head == "rotor") and chunk is not None and chunk < 4:
            raise ValueError(f"a rotor chunk of {chunk} coordinates (Cl({chunk.bit_length() - 1})) has no bivector to "
                             "learn: every rotor is the identity; use --chunk-size 4 or more")
        if self.kind == "rotor" and self.hidden < 4:
            raise ValueError(f"rotor maps of hidden width {self.hidden} have chunks of at most {self.hidden} "
                             "coordinates, whose rotors have no bivector to learn; use --hidden 4 or more")
        if self.kind == "lowrank" and self.rank >= self.hidden:
            raise ValueError(f"--rank {self.rank} at hidden width {self.hidden}: a low-rank map of rank >= its width has "
                             f"no lower rank and at least the dense map's parameters; choose --rank below {self.hidden}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainConfig:
    """Optimiser budget of a run (identical for every model kind in a comparison).

    Parameters
    ----------
    epochs, batch_size : int
    lr : float
        Peak learning rate of Adam; cosine-annealed to 0 over all steps after a linear warm-up.
    weight_decay : float
        AdamW decoupled weight decay (0 = plain Adam).
    warmup_steps : int
    seed : int
        Seeds the initialisation (torch) and the shuffling (numpy, per epoch).
    eval_batch_size : int
    """

    epochs: int = 10
    batch_size: int = 256
    lr: float = 7e-3
    weight_decay: float = 0.0
    warmup_steps: int = 50
    seed: int = 0
    eval_batch_size: int = 2000

    def validate(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a positive finite number, got {self.lr!r}")
        if not (self.weight_decay >= 0 and math.isfinite(self.weight_decay)):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {self.warmup_steps!r}")
        check_decay(self.lr, self.weight_decay)
        check_seed(self.seed)
