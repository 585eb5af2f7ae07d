r"""Rotations fused into the weights of a causal LM (QuaRot and SpinQuant's R1, R2, R4).

**R1, fused** (Llama, Mistral, Qwen2: :data:`ARCHITECTURES`). With every RMSNorm's scale folded
into the linear layers that read its output, an RMSNorm commutes with any orthogonal Q (it divides
by the norm, which Q keeps). The residual stream can then be rotated, x -> x Q, at no run-time cost
(:func:`rotate_residual`):

- the embeddings' rows: :math:`E \leftarrow E Q`;
- layers that read the stream (q, k, v, gate, up, the head): :math:`W \leftarrow W Q`;
- layers that write it (o, down): :math:`W \leftarrow Q^T W`.

**R1, online** (Gemma-3: :data:`ONLINE_ARCHITECTURES`). Gemma-3 also normalises the attention's
and the MLP's outputs before adding them to the stream (post_attention_layernorm and
post_feedforward_layernorm), each with its own per-channel scale :math:`1 + w`; a per-channel
scale between a writer and the stream does not commute with a rotation of the stream, so the
stream cannot be rotated. Instead the stream stays as it is and R1 is applied where the stream is
read (:func:`rotate_readers`):

- no norm scale is folded: the rotation is applied to the norm's output, scale included, so the
  readers' weights keep their own columns and their grids never see the scale. (Folding
  :math:`1 + w`, which reaches 62 on the input norms of the offline Gemma-3-270M, multiplies the
  readers' columns by it, and each output channel's grid is then set by its largest scaled column:
  at W8 RTN folding alone costs 1.2 nats of WikiText-2 ln PPL, at W4 with a Hadamard R1 the model
  breaks, docs/results.md. ``fold_norms(model, online="fold")`` still folds, for comparison.) The
  post norms, the final norm, the embeddings (with their :math:`\sqrt{d}` scale) and the tied
  head are left alone (the head is not quantized, so nothing is gained by rotating its input);
- a forward hook on each of the two norms read by linear layers (input_layernorm -> q, k, v;
  pre_feedforward_layernorm -> gate, up) multiplies its output by Q at run time
  (:class:`OnlineRotation`: a fast Walsh-Hadamard transform and one small product for the
  Hadamard family, the same followed by the learned chunk blocks for butterfly and rotor, a dense
  product for Cayley), and the readers' weights become :math:`W \leftarrow W Q`;
- the writers (o, down) are not R1-rotated.

:func:`r1_mode` says which of the two a model gets, :func:`r1_projections` which projections R1
rotates, and :func:`apply_r1` applies it either way.

**R2.** Per attention head, the value vectors can be rotated by an orthogonal :math:`R_2` of the
head's width, undone in the columns of o_proj (:func:`rotate_heads`): :math:`W_v^{(g)} \leftarrow
R_2^T W_v^{(g)}` for each key-value head g and :math:`W_o^{(h)} \leftarrow W_o^{(h)} R_2` for each
query head h (the heads sharing a value head share :math:`R_2`). Gemma-3's q_norm and k_norm act on
the queries and keys only, so they do not meet :math:`R_2`.

**R4.** The MLP's inner activation passes through its nonlinearity and a product, so its rotation
cannot be fused on both sides: :func:`online_hadamard` multiplies down_proj's input by a normalised
Hadamard matrix :math:`H` at run time (a forward pre-hook; a fast Walsh-Hadamard transform and one
small product, :func:`galinear.quantize.hadamard.apply_hadamard`) and fuses :math:`H^T` into
down_proj's weight.

Every step leaves the unquantized model's function unchanged up to float rounding
(``tests/quantize/test_fusion.py``, ``tests/quantize/test_gemma_fusion.py``). The online parts
come out again with :func:`remove_online_hadamard` and :func:`remove_online_r1`, which multiply
them back into the weights (a plain model computing the same function). Other families are
refused by :func:`check_architecture`.
"""
from __future__ import annotations

import math

import torch

from galinear.lm import models
from galinear.quantize.hadamard import _hadamard_cached, _factors, apply_hadamard, hadamard, hadamard_factors

__all__ = ["ARCHITECTURES", "ONLINE_ARCHITECTURES", "check_architecture", "r1_mode", "r1_projections", "apply_r1",
           "untie_head", "fold_norms", "rotate_residual", "rotate_readers", "remove_online_r1", "OnlineRotation",
           "online_rotation", "rotate_heads", "online_hadamard", "remove_online_hadamard", "read_norms", "head_dim",
           "READERS", "WRITERS"]

#: model_type values whose layers have the structure the module doc describes (R1 fused).
ARCHITECTURES = ("llama", "mistral", "qwen2")
#: model_type values with norms between the writers and the residual stream (R1 online).
ONLINE_ARCHITECTURES = ("gemma3_text",)
READERS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
WRITERS = ("o_proj", "down_proj")
_ONLINE = "_galinear_online_hadamard"
_ONLINE_R1 = "_galinear_online_r1"
#: Norms of a Gemma-3 decoder layer: the two read by linear layers (with their readers), the two on the outputs.
_GEMMA_READ_NORMS = (("input_layernorm", ("q_proj", "k_proj", "v_proj")),
                     ("pre_feedforward_layernorm", ("gate_proj", "up_proj")))
_GEMMA_POST_NORMS = ("post_attention_layernorm", "post_feedforward_layernorm")


def _kind(model) -> str:
    config = getattr(model, "config", None)
    return getattr(config, "model_type", None) or type(model).__name__


def check_architecture(model) -> str:
    """The model's type when its rotations can be applied, else ValueError naming it and the supported ones."""
    kind = _kind(model)
    if kind == "gemma3":
        raise ValueError("the Gemma-3 image-text model (model_type 'gemma3') is not supported for rotation fusion: "
                         "galinear quantize takes its text model (Gemma3ForCausalLM, model_type 'gemma3_text', as "
                         "the GGUF route loads Gemma-3-270M); use --rotation none otherwise")
    if kind not in ARCHITECTURES + ONLINE_ARCHITECTURES:
        why = (" (Gemma-3's text model is supported, with R1 applied online; other Gemma generations are not)"
               if str(kind).startswith("gemma") else "")
        raise ValueError(f"unknown architecture {kind!r} for rotation fusion{why}: galinear quantize fuses rotations "
                         f"into {', '.join(ARCHITECTURES)} models and applies R1 online in "
                         f"{', '.join(ONLINE_ARCHITECTURES)} models; use --rotation none with a model of another "
                         "family, or a Llama-family model (the default smollm2-135m)")
    for layer in models.decoder_layers(model):
        for name in READERS + WRITERS:
            if not isinstance(getattr(models.holder(layer, name), name, None), torch.nn.Linear):
                raise ValueError(f"{type(layer).__name__} has no nn.Linear {name}: the rotations are fused into "
                                 "separate q/k/v/o and gate/up/down projections")
        if kind in ONLINE_ARCHITECTURES:
            for name in [n for n, _ in _GEMMA_READ_NORMS] + list(_GEMMA_POST_NORMS):
                norm = getattr(layer, name, None)
                if norm is None or not isinstance(getattr(norm, "weight", None), torch.nn.Parameter):
                    raise ValueError(f"{type(layer).__name__} has no {name} with a weight: R1 is applied online at "
                                     "Gemma-3's input_layernorm and pre_feedforward_layernorm")
    if kind in ONLINE_ARCHITECTURES:
        _check_unit_offset(getattr(models.decoder_layers(model)[0], "input_layernorm"))
    return kind


@torch.no_grad()
def _check_unit_offset(norm) -> None:
    """Raise unless ``norm`` computes x / rms(x) * (1 + weight), the scale :func:`fold_norms` folds (Gemma's)."""
    width, device = norm.weight.shape[0], norm.weight.device
    x = torch.linspace(-1.0, 2.0, width, dtype=torch.float32, device=device)[None]
    weight = torch.linspace(-0.5, 0.5, width, dtype=torch.float32, device=device)
    saved = norm.weight.detach().clone()
    try:
        norm.weight.copy_(weight.to(norm.weight.dtype))
        out = norm(x.to(norm.weight.dtype)).float()
    finally:
        norm.weight.copy_(saved)
    eps = float(getattr(norm, "eps", getattr(norm, "variance_epsilon", 1e-6)))
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight)
    if not torch.allclose(out, want, rtol=1e-3, atol=1e-3):
        raise ValueError(f"{type(norm).__name__} does not compute x / rms(x) * (1 + weight) as Gemma-3's RMSNorm does "
                         "in the transformers this was written for; its scale cannot be folded")


def r1_mode(model) -> str:
    """``"fused"`` where R1 rotates the residual stream (:data:`ARCHITECTURES`), ``"online"`` where it is
    applied at the norms that feed linear layers (:data:`ONLINE_ARCHITECTURES`); ValueError otherwise."""
    kind = _kind(model)
    if kind in ARCHITECTURES:
        return "fused"
    if kind in ONLINE_ARCHITECTURES:
        return "online"
    check_architecture(model)  # raises, naming the supported families
    raise AssertionError(kind)


def r1_projections(model) -> tuple:
    """The decoder projections whose weights R1 rotates: readers and writers when fused, readers when online."""
    return READERS + WRITERS if r1_mode(model) == "fused" else READERS


def head_dim(model) -> int:
    config = model.config
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _linear(model, layer: int, name: str) -> torch.nn.Linear:
    return models.projection(model, layer, name)


@torch.no_grad()
def _set(param: torch.nn.Parameter, value: torch.Tensor) -> None:
    param.copy_(value.to(param.dtype))


def untie_head(model) -> None:
    """Give the head its own weight when it shares the embeddings' (SmolLM2 does): the two are
    rotated differently once a norm scale is folded into the head."""
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    if head.weight is embed.weight or head.weight.data_ptr() == embed.weight.data_ptr():
        head.weight = torch.nn.Parameter(embed.weight.detach().clone(), requires_grad=False)
    model.config.tie_word_embeddings = False
    if hasattr(model, "_tied_weights_keys"):
        model._tied_weights_keys = []


@torch.no_grad()
def fold_norms(model, online: str = "keep") -> None:
    """Fold every RMSNorm's scale into the linear layers that read its output, leaving the scales at 1.

    Online-R1 families (Gemma-3): with ``online="keep"`` (default) nothing is folded, the online R1
    rotating the norms' scaled outputs (module doc); with ``"fold"``, the norms read by linear layers
    have :math:`1 + w` folded into their readers and w set to 0 (the post norms, the final norm and
    the tied head are left as they are either way)."""
    if online not in ("keep", "fold"):
        raise ValueError(f"fold_norms: online must be 'keep' or 'fold', got {online!r}")
    if _kind(model) in ONLINE_ARCHITECTURES:
        if online == "fold":
            _fold_read_norms(model)
        return
    untie_head(model)
    blocks = models.decoder_layers(model)
    for index, block in enumerate(blocks):
        for norm, readers in ((block.input_layernorm, ("q_proj", "k_proj", "v_proj")),
                              (block.post_attention_layernorm, ("gate_proj", "up_proj"))):
            scale = norm.weight.double()
            for name in readers:
                linear = _linear(model, index, name)
                _set(linear.weight, linear.weight.double() * scale[None, :])
            norm.weight.fill_(1.0)
    final = model.model.norm
    head = model.get_output_embeddings()
    _set(head.weight, head.weight.double() * final.weight.double()[None, :])
    final.weight.fill_(1.0)


@torch.no_grad()
def _fold_read_norms(model) -> None:
    for index, block in enumerate(models.decoder_layers(model)):
        for norm_name, readers in _GEMMA_READ_NORMS:
            norm = getattr(block, norm_name)
            scale = 1.0 + norm.weight.double()
            for name in readers:
                linear = _linear(model, index, name)
                _set(linear.weight, linear.weight.double() * scale[None, :])
            norm.weight.zero_()


def _check_not_online(model) -> None:
    if _kind(model) in ONLINE_ARCHITECTURES:
        raise ValueError(f"{_kind(model)} models cannot have their residual stream rotated (norms sit between the "
                         "writers and the stream); use apply_r1, which applies R1 online for them")


@torch.no_grad()
def rotate_residual(model, Q: torch.Tensor) -> None:
    """Rotate the residual stream by the orthogonal ``Q`` (width x width): x -> x Q (module doc).
    The norms must be folded first (:func:`fold_norms`)."""
    _check_not_online(model)
    embed = model.get_input_embeddings()
    Q = Q.detach().to(device=embed.weight.device, dtype=torch.float64)
    _set(embed.weight, embed.weight.double() @ Q)
    for index in range(len(models.decoder_layers(model))):
        for name in READERS:
            linear = _linear(model, index, name)
            _set(linear.weight, linear.weight.double() @ Q)
        for name in WRITERS:
            linear = _linear(model, index, name)
            _set(linear.weight, Q.t() @ linear.weight.double())
            if linear.bias is not None:
                _set(linear.bias, linear.bias.double() @ Q)
    head = model.get_output_embeddings()
    _set(head.weight, head.weight.double() @ Q)


# ------------------------------------------------------------------------------------ online R1
def _signed_hadamard_times(x: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """``x @ D H / sqrt(n)`` (D = diag(signs), H = :func:`galinear.quantize.hadamard.hadamard` of the
    width): the signs, a fast Walsh-Hadamard transform of the power-of-two factor and one m x m
    product with the base order's transpose (H = H_m kron H_2^k, so x H applies H_m^T to the m axis)."""
    from galinear.nn.functional import fwht

    n = x.shape[-1]
    m, power = hadamard_factors(n)
    y = x * signs
    y = fwht(y, power) if power > 1 else y
    if m == 1:
        return y
    base = torch.as_tensor(_hadamard_cached(m), dtype=x.dtype, device=x.device) / math.sqrt(m)
    lead = y.shape[:-1]
    return torch.einsum("ji,...jp->...ip", base, y.reshape(*lead, m, power)).reshape(*lead, n)


class OnlineRotation:
    """x -> x Q on the last axis at run time, by the cheapest route Q's structure allows:

    - ``"hadamard"``: Q = D H / sqrt(n), a random Hadamard (signs, then the fast transform);
    - ``"hadamard+blocks"``: Q = D H / sqrt(n) diag(B_1, ..., B_m), the learned chunk blocks of
      the butterfly and rotor families applied as one batched c x c product after the transform;
    - ``"dense"``: one n x n product (Cayley, or a width no Hadamard order covers).

    :attr:`matrix` is the whole Q in float64 (what the readers' weights are multiplied by). Not an
    ``nn.Module``: it is kept beside the norm it follows, out of the model's state dict, and its
    tensors follow the input's dtype and device."""

    def __init__(self, matrix: torch.Tensor, signs: torch.Tensor | None = None, blocks: torch.Tensor | None = None):
        self.matrix = matrix.detach().double().cpu()
        self.signs = None if signs is None else signs.detach().double().cpu()
        self.blocks = None if blocks is None or self.signs is None else blocks.detach().double().cpu()
        self.kind = "dense" if self.signs is None else ("hadamard" if self.blocks is None else "hadamard+blocks")
        self._cast = {}

    def _as(self, name: str, like: torch.Tensor) -> torch.Tensor:
        key = (name, like.dtype, like.device)
        if key not in self._cast:
            self._cast[key] = getattr(self, name).to(device=like.device, dtype=like.dtype)
        return self._cast[key]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "dense":
            return x @ self._as("matrix", x)
        y = _signed_hadamard_times(x, self._as("signs", x))
        if self.blocks is None:
            return y
        blocks = self._as("blocks", x)
        chunks, c = blocks.shape[0], blocks.shape[1]
        lead = y.shape[:-1]
        return torch.einsum("...ki,kij->...kj", y.reshape(*lead, chunks, c), blocks).reshape(*lead, chunks * c)

    def __deepcopy__(self, memo):
        out = OnlineRotation.__new__(OnlineRotation)
        memo[id(self)] = out
        out.matrix, out.signs, out.blocks, out.kind = self.matrix, self.signs, self.blocks, self.kind
        out._cast = {}
        return out  # the tensors are never changed in place: a copy shares them

    def __repr__(self) -> str:
        return f"OnlineRotation({self.kind}, width {self.matrix.shape[0]})"


def _hadamard_signs(base: torch.Tensor) -> torch.Tensor | None:
    """D when ``base`` is D H / sqrt(n) for :func:`hadamard` H (a family's Q_0), else None."""
    n = base.shape[0]
    if _factors(n) is None:
        return None
    H = torch.as_tensor(hadamard(n), dtype=torch.float64, device=base.device)
    signs = torch.sign(base[:, 0].double()) * H[:, 0]
    if not torch.allclose(base.double(), signs[:, None] * H / math.sqrt(n), atol=1e-5):
        return None
    return signs


def online_rotation(rotation) -> OnlineRotation | None:
    """The :class:`OnlineRotation` of a :class:`~galinear.quantize.rotations.Rotation` (its fast
    route: module doc) or of a matrix (dense). None for the identity (family ``none``)."""
    if torch.is_tensor(rotation):
        return OnlineRotation(rotation)
    if rotation.family == "none":
        return None
    with torch.no_grad():
        Q = rotation.matrix().detach().double()
        signs = _hadamard_signs(rotation.base) if rotation.family in ("hadamard", "butterfly", "rotor") else None
        if signs is None:
            return OnlineRotation(Q)
        n = rotation.width
        exact = signs[:, None] * torch.as_tensor(hadamard(n), dtype=torch.float64, device=signs.device) / math.sqrt(n)
        blocks = None
        if rotation.family in ("butterfly", "rotor"):
            learned = rotation.learned().detach().double()
            c = rotation.chunk
            blocks = torch.stack([learned[k * c:(k + 1) * c, k * c:(k + 1) * c] for k in range(n // c)])
            exact = exact @ torch.block_diag(*blocks)
        if not torch.allclose(exact, Q, atol=1e-4):  # a structure not the one assumed: the dense route
            return OnlineRotation(Q)
        return OnlineRotation(exact, signs, blocks)


def _online_r1_hook(module, args, output):
    return getattr(module, _ONLINE_R1)(output)


def read_norms(model) -> list:
    """The norms whose outputs an online R1 rotates (every decoder layer's norms read by linear layers),
    in layer order; empty when R1 is fused."""
    if r1_mode(model) == "fused":
        return []
    return [getattr(block, norm_name) for block in models.decoder_layers(model) for norm_name, _ in _GEMMA_READ_NORMS]


@torch.no_grad()
def rotate_readers(model, rotation) -> OnlineRotation | None:
    """Online R1 (module doc): a forward hook multiplying the output of every norm read by linear layers
    by Q, and the readers' weights W <- W Q. ``rotation``: a Rotation (its fast route) or a matrix.
    The norms' scales may stay (the default of :func:`fold_norms`) or be folded. Returns the :class:`OnlineRotation` (None for
    the identity, which changes nothing)."""
    online = online_rotation(rotation)
    if online is None:
        return None
    Q = online.matrix
    for index, block in enumerate(models.decoder_layers(model)):
        for norm_name, readers in _GEMMA_READ_NORMS:
            norm = getattr(block, norm_name)
            if getattr(norm, _ONLINE_R1, None) is not None:
                raise ValueError(f"layer {index}'s {norm_name} already applies an online R1; apply R1 once")
            for name in readers:
                linear = _linear(model, index, name)
                _set(linear.weight, linear.weight.double() @ Q.to(linear.weight.device))
            setattr(norm, _ONLINE_R1, online)
            norm.register_forward_hook(_online_r1_hook)
    return online


@torch.no_grad()
def remove_online_r1(model) -> None:
    """Undo the online R1's split for a plain model: the readers' W <- W Q^T (the weights as they act on the
    unrotated norm output, float grid points or not) and the hooks removed. The function is unchanged."""
    for index, block in enumerate(models.decoder_layers(model)):
        for norm_name, readers in _GEMMA_READ_NORMS:
            norm = getattr(block, norm_name, None)
            online = getattr(norm, _ONLINE_R1, None)
            if online is None:
                continue
            delattr(norm, _ONLINE_R1)
            for key, hook in list(norm._forward_hooks.items()):
                if hook is _online_r1_hook:
                    del norm._forward_hooks[key]
            for name in readers:
                linear = _linear(model, index, name)
                _set(linear.weight, linear.weight.double() @ online.matrix.t().to(linear.weight.device))


@torch.no_grad()
def apply_r1(model, Q) -> None:
    """R1 as :func:`r1_mode` says: fused, :func:`rotate_residual` with the matrix; online,
    :func:`rotate_readers`. ``Q``: a :class:`~galinear.quantize.rotations.Rotation` (online: applied by
    its family's fast route) or an orthogonal matrix (online: a dense product). Fused: norms folded first (:func:`fold_norms`)."""
    if r1_mode(model) == "fused":
        rotate_residual(model, Q.matrix().detach() if not torch.is_tensor(Q) else Q)
    else:
        rotate_readers(model, Q)


# ------------------------------------------------------------------------------------ R2 and R4
@torch.no_grad()
def rotate_heads(model, R2) -> None:
    """Rotate every head's value vectors by ``R2`` (head_dim x head_dim, or one per layer) and undo
    it in o_proj's columns (module doc)."""
    hd = head_dim(model)
    for index in range(len(models.decoder_layers(model))):
        v, o = _linear(model, index, "v_proj"), _linear(model, index, "o_proj")
        R = (R2[index] if isinstance(R2, (list, tuple)) else R2).detach().to(device=v.weight.device,
                                                                               dtype=torch.float64)
        groups = v.out_features // hd
        wv = v.weight.double().reshape(groups, hd, -1)
        _set(v.weight, torch.einsum("ji,gjc->gic", R, wv).reshape(v.weight.shape))
        if v.bias is not None:
            _set(v.bias, (v.bias.double().reshape(groups, hd) @ R).reshape(-1))
        heads = o.in_features // hd
        wo = o.weight.double().reshape(o.out_features, heads, hd)
        _set(o.weight, torch.einsum("ohj,ji->ohi", wo, R).reshape(o.weight.shape))


def _hadamard_hook(module, args):
    return (apply_hadamard(args[0]),) + tuple(args[1:])


@torch.no_grad()
def online_hadamard(model) -> int:
    """The online rotation before every down_proj: H^T fused into the weight, H applied to the input
    at run time by a forward pre-hook. Returns the MLP width it rotates."""
    width = _linear(model, 0, "down_proj").in_features
    hadamard_factors(width)  # refuses a width no Hadamard order covers
    for index in range(len(models.decoder_layers(model))):
        down = _linear(model, index, "down_proj")
        _set(down.weight, apply_hadamard(down.weight.double()))  # W H^T: the rows transformed
        down.register_forward_pre_hook(_hadamard_hook)
        setattr(down, _ONLINE, True)
    return width


@torch.no_grad()
def remove_online_hadamard(model) -> None:
    """Undo the online rotation's split for a plain model: W <- W H (the weight as it acts on the
    unrotated input, float grid points or not) and the hook removed. The function is unchanged."""
    for index in range(len(models.decoder_layers(model))):
        down = _linear(model, index, "down_proj")
        if getattr(down, _ONLINE, None) is None:
            continue
        delattr(down, _ONLINE)
        for key, hook in list(down._forward_pre_hooks.items()):
            if hook is _hadamard_hook:
                del down._forward_pre_hooks[key]
        _set(down.weight, _times_hadamard(down.weight.double()))


def _times_hadamard(w: torch.Tensor) -> torch.Tensor:
    """``w @ Hn`` for the normalised Hadamard Hn of :func:`apply_hadamard` (which computes ``x @ Hn.T``)."""
    eye = torch.eye(w.shape[1], dtype=w.dtype, device=w.device)
    return w @ apply_hadamard(eye).t()
