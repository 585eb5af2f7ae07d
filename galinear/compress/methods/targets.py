"""Which projections of each replaced layer a study replaces (``--targets``), and in which order
and by which objective they are fitted.

``--targets q,k,v,o,gate,up,down`` names the attention's q_proj, k_proj, v_proj, o_proj and the
MLP's gate_proj, up_proj, down_proj (the Llama, Qwen2, Mistral and Gemma-3 layout); the default
is q, k, v, as in the paper. Within a layer the projections are fitted in the order the forward
pass reads them, each stage on the inputs of the network in which everything fitted before it
(earlier layers of the set, earlier stages of this layer) is already replaced:

- projection-wise objective (``qkv``): q, k and v (one input: the attention input), then o
  (its input: the attention heads' outputs), then gate and up (the MLP input), then down (the
  gated activations), each projection to the original projection's outputs on the original
  network's inputs;
- block objective (``attention``): the layer's attention projections jointly to the attention
  block's output (:mod:`galinear.compress.fitting.objective`), then its MLP projections jointly to the
  MLP block's output;
- ``logits``: every target of the layer jointly to the model's next-token distribution.
"""
from __future__ import annotations

from galinear.lm.models import ALL_PROJECTIONS, ATTENTION_PROJECTIONS, MLP_PROJECTIONS, PROJECTIONS

#: Short names of --targets and the modules they name.
SHORT = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
         "down": "down_proj"}
DEFAULT = PROJECTIONS
#: What each projection reads (a `where` of galinear.compress.fitting.activations.capture).
INPUTS = {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "o_proj": "o_in",
          "gate_proj": "mlp_in", "up_proj": "mlp_in", "down_proj": "down_in"}


def parse_targets(text: str) -> tuple:
    """'q,k,v,o' -> ('q_proj', 'k_proj', 'v_proj', 'o_proj'), in the order of the forward pass;
    the module names (``gate_proj``) are accepted too; 'all' is every one."""
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if [x.lower() for x in items] == ["all"]:
        return ALL_PROJECTIONS
    names = []
    for item in items:
        name = SHORT.get(item.lower(), item.lower())
        if name not in ALL_PROJECTIONS:
            raise ValueError(f"--targets: {item!r} is not a projection; choose from {','.join(SHORT)} (or all)")
        if name in names:
            raise ValueError(f"--targets: {item!r} is given twice")
        names.append(name)
    if not names:
        raise ValueError(f"--targets: no projection in {text!r}; e.g. --targets q,k,v,o,gate,up,down")
    return check(names)


def check(targets) -> tuple:
    """The targets as a tuple in forward order, or ValueError for an unknown, repeated or empty one."""
    targets = tuple(targets)
    unknown = [t for t in targets if t not in ALL_PROJECTIONS]
    if unknown or not targets or len(set(targets)) != len(targets):
        raise ValueError(f"targets must be distinct names among {', '.join(ALL_PROJECTIONS)}, got {targets!r}")
    return tuple(p for p in ALL_PROJECTIONS if p in targets)


def short(targets) -> str:
    """('q_proj', 'o_proj') -> 'q,o'."""
    back = {v: k for k, v in SHORT.items()}
    return ",".join(back[t] for t in targets)


def tag(targets) -> str:
    """The part of cache names that says which projections the network replaces ('' for the default)."""
    return "" if tuple(targets) == DEFAULT else "-T" + short(targets).replace(",", "")


def slot(projection: str) -> int:
    """The :func:`galinear.compress.fitting.seeds.fit_seed` slot of a projection: q, k, v 0-2 (as ever), o 3,
    gate 4, up 5, down 6."""
    return ALL_PROJECTIONS.index(projection)


def stages(targets, objective: str) -> list:
    """The fits of one layer in order: [(projections, block), ...] with block ``None`` (each
    projection on its own), ``"attention"``, ``"mlp"`` or ``"logits"`` (the projections jointly)."""
    targets = check(targets)
    if objective == "logits":
        return [(targets, "logits")]
    if objective == "attention":
        groups = [(tuple(p for p in targets if p in ATTENTION_PROJECTIONS), "attention"),
                  (tuple(p for p in targets if p in MLP_PROJECTIONS), "mlp")]
        return [g for g in groups if g[0]]
    out = []
    for where in ("attn_in", "o_in", "mlp_in", "down_in"):
        group = tuple(p for p in targets if INPUTS[p] == where)
        if group:
            out.append((group, None))
    return out


__all__ = ["DEFAULT", "INPUTS", "SHORT", "check", "joint_note", "parse_targets", "short", "slot", "stages", "tag"]


def joint_note(targets, objective: str) -> str:
    """How a joint objective fitted the targets, for the report's fit column."""
    targets = check(targets)
    if objective == "logits":
        return f"{'/'.join(short(targets).split(','))} jointly (logits objective)"
    parts = []
    for group, block in stages(targets, objective):
        what = "/".join(short(group).split(","))
        parts.append(f"{what} jointly ({block} objective)" if block == "attention" else f"{what} jointly (MLP output)")
    return ", ".join(parts)
