"""Fitting a layer's q, k and v replacements jointly to what the model needs.

The default objective ("qkv", :mod:`galinear.compress.fitting.projection`) fits each projection on its own to
the original projection's outputs. Two joint objectives fit the three replacements of one layer
together:

``attention``
    The layer's attention output (the output of o_proj, what the residual stream receives),
    computed by the model's own attention module (its RoPE, grouped key/value heads, causal mask
    and any q/k norms) on the captured attention inputs of whole windows. With x_w the inputs of
    window w in the partly compressed network, x°_w the original network's, and Attn_Q,K,V the
    layer's attention with the projections Q, K, V:

        L = mean over windows, tokens and channels of (Attn_{q',k',v'}(x_w) - Attn_{q,k,v}(x°_w))^2.

    With MLP projections among the targets (``--targets ...,gate,up,down``) this objective is the
    block objective: the layer's attention projections (q, k, v and o) are fitted jointly to the
    attention block's output as above, then its MLP projections jointly to the MLP block's output
    on the MLP inputs captured in the same way (block ``mlp``):

        L = mean over windows, tokens and channels of (MLP_{g',u',d'}(m_w) - MLP_{g,u,d}(m°_w))^2.

``logits``
    The model's next-token distribution on the training windows: the mean over tokens of
    KL(p_original || p_replaced), running only the layers from the fitted one upward (from the
    residual stream captured at its input) with the replacements installed.

Every Adam step takes whole windows (attention needs each token's prefix): ``window_batch``
windows per step. A fixed-step fit takes as many steps as the projection-wise fit of the same
rows and epochs (ceil(rows / batch_size) per pass), so the two compare at equal steps; the
until-converged fit uses the stopping rule of :mod:`galinear.compress.fitting.converge` on the same
objective over the validation windows.
"""
from __future__ import annotations

import math

from galinear.compress.fitting import activations, surgery
from galinear.optim import loop as optimise
from galinear.lm import models

OBJECTIVES = ("qkv", "attention", "logits")
#: What a :class:`LayerObjective` matches: the attention block's output, the MLP block's, or the logits.
BLOCKS = ("attention", "mlp", "logits")
_DROP = ("past_key_values", "past_key_value", "cache", "use_cache", "hidden_states", "output_attentions")


def check_objective(name: str) -> str:
    if name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {name!r}")
    return name


def attention_call(model, layer: int, length: int) -> dict:
    """The keyword arguments the model passes to layer ``layer``'s attention module for a window
    of ``length`` tokens (position embeddings, causal mask, ...), recorded from one real forward."""
    import torch

    attn = models.attention(models.decoder_layers(model)[layer])
    seen = {}

    def pre_hook(module, args, kwargs):
        seen.update({k: v for k, v in kwargs.items() if k not in _DROP})
        raise activations._Stop

    handle = attn.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        with torch.no_grad():
            model(input_ids=torch.zeros((1, length), dtype=torch.long), use_cache=False)
    except activations._Stop:
        pass
    else:
        raise RuntimeError(f"layer {layer}'s attention was never called in the forward pass")
    finally:
        handle.remove()
    return seen


def attention_output(model, layer: int, hidden, call: dict, replacements: dict | None = None):
    """o_proj output of layer ``layer``'s attention on ``hidden`` (windows, L, width), with
    ``replacements = {"q_proj": module, ...}`` installed for the call (differentiable in them)."""
    attn = models.attention(models.decoder_layers(model)[layer])
    swap = {(layer, p): m for p, m in (replacements or {}).items()}
    with surgery.swapped(model, swap):
        out = attn(hidden_states=hidden, **call)
    return out[0] if isinstance(out, tuple) else out


def mlp_output(model, layer: int, hidden, replacements: dict | None = None):
    """Output of layer ``layer``'s MLP on ``hidden`` (windows, L, width), with ``replacements =
    {"gate_proj": module, ...}`` installed for the call (differentiable in them)."""
    block = models.mlp(models.decoder_layers(model)[layer])
    swap = {(layer, p): m for p, m in (replacements or {}).items()}
    with surgery.swapped(model, swap):
        return block(hidden)


def next_token_logits(model, layer: int, residual, replacements: dict | None = None):
    """Logits of the model run from decoder layer ``layer`` on its residual-stream input
    ``residual`` (windows, L, width), with ``replacements`` installed at that layer."""
    swap = {(layer, p): m for p, m in (replacements or {}).items()}
    with surgery.swapped(model, swap):
        with models.starting_at(model, layer):
            return model(inputs_embeds=residual, use_cache=False).logits


class LayerObjective:
    """One layer's joint objective on fixed windows.

    Parameters
    ----------
    model, layer
        The model (with any earlier replacements already installed by the caller) and the layer.
    objective : {"attention", "mlp", "logits"}
    inputs, original_inputs : (windows, L, width) tensors
        attention: the attention inputs in the partly compressed and in the original network.
        mlp: the MLP inputs in the same two networks.
        logits: the residual-stream inputs of the layer in the same two networks.
    """

    def __init__(self, model, layer: int, objective: str, inputs, original_inputs):
        import torch

        if objective not in BLOCKS:
            raise ValueError(f"a layer objective is one of {', '.join(BLOCKS)}, got {objective!r} (the qkv objective "
                             "is fitted projection by projection: galinear.compress.fitting.projection)")
        self.model, self.layer, self.objective = model, layer, objective
        if inputs.dim() != 3 or inputs.shape != original_inputs.shape:
            raise ValueError(f"inputs must be (windows, L, width) and match the original inputs; got "
                             f"{tuple(inputs.shape)} and {tuple(original_inputs.shape)}")
        self.inputs, self.original_inputs = inputs, original_inputs
        self.call = attention_call(model, layer, inputs.shape[1]) if objective == "attention" else None
        self._targets = None
        if objective != "logits":  # (windows, L, width): small, computed once
            with torch.no_grad():
                self._targets = torch.cat([self._block(original_inputs[i:i + 4], None)
                                           for i in range(0, len(original_inputs), 4)])

    def __len__(self) -> int:
        return len(self.inputs)

    def _block(self, hidden, replacements):
        if self.objective == "mlp":
            return mlp_output(self.model, self.layer, hidden, replacements)
        return attention_output(self.model, self.layer, hidden, self.call, replacements)

    def loss(self, replacements: dict, idx):
        """The objective on windows ``idx`` (a differentiable scalar)."""
        import torch

        if self.objective != "logits":
            return torch.nn.functional.mse_loss(self._block(self.inputs[idx], replacements), self._targets[idx])
        def log_probs(logits):  # half-precision logits in float32, float64 ones kept
            return torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)

        with torch.no_grad():
            target = log_probs(next_token_logits(self.model, self.layer, self.original_inputs[idx]))
        logp = log_probs(next_token_logits(self.model, self.layer, self.inputs[idx], replacements))
        return (target.exp() * (target - logp)).sum(-1).mean()

    def value(self, replacements: dict, window_batch: int = 2) -> float:
        """The objective over all windows (no gradients)."""
        import torch

        total = 0.0
        with torch.no_grad():
            for i in range(0, len(self), window_batch):
                idx = torch.arange(i, min(i + window_batch, len(self)))
                total += float(self.loss(replacements, idx)) * len(idx)
        return total / max(len(self), 1)

    def target_mean_square(self) -> float:
        """Mean square of the block's target (to make its loss relative); 1 for logits."""
        return float(self._targets.double().pow(2).mean()) if self._targets is not None else 1.0


def fit_layer(modules: dict, objective: LayerObjective, *, lr: float, steps: int | None = None,
              window_batch: int = 1, seed: int = 0, valid: LayerObjective | None = None,
              max_steps: int | None = None, eval_every: int = 25, patience: int = 4, min_delta: float = 1e-3,
              decay: float = 0.3, decays: int = 1, progress: str | None = None) -> dict:
    """Fit ``modules = {"q_proj": ..., "k_proj": ..., "v_proj": ...}`` jointly to ``objective`` by Adam.

    Fixed steps (``steps``): cosine schedule from ``lr`` to 0. Until converged (``max_steps`` and
    ``valid``): constant ``lr``, the validation objective every ``eval_every`` steps, decays and stop
    as in :func:`galinear.compress.fitting.converge.fit_until_converged`, best parameters restored.
    ``progress``: the label of a :class:`galinear._progress.Progress` (None: silent).

    Returns a dict with ``steps``, ``final_loss`` (mean of the last 10 batch losses), ``lr_last``,
    ``seconds`` and, until converged, ``best_step``, ``stopped``, ``valid_loss`` and ``curve``.
    """
    converged = max_steps is not None
    if converged and valid is None:
        raise ValueError("a fit until convergence needs validation windows (valid=...)")
    total = int(max_steps if converged else (steps or 0))
    if total < 1:
        raise ValueError(f"the number of steps must be >= 1, got {total}")
    params = [p for m in modules.values() for p in m.parameters() if p.requires_grad]
    if not params:
        return {"steps": 0, "final_loss": float("nan"), "lr_last": 0.0, "seconds": 0.0}
    batches = optimise.Batches(len(objective), window_batch, seed)
    optimizer = optimise.make_optimizer("adam", params, lr)
    run = optimise.train(optimizer, lambda step: objective.loss(modules, batches.next()), steps=total,
                         scheduler=None if converged else optimise.cosine_scheduler(optimizer, total),
                         modules=modules, eval_every=eval_every,
                         validate=(lambda: valid.value(modules)) if converged else None,
                         plateau=optimise.Plateau(patience=patience, min_delta=min_delta, decay=decay, decays=decays),
                         nonfinite=f"non-finite {objective.objective} loss at step {{step}}; lower the learning rate",
                         progress=progress)
    stats = {"steps": int(run.step), "final_loss": run.final_loss, "lr_last": run.lr, "seconds": run.seconds,
             "objective": objective.objective, "target_mean_square": objective.target_mean_square(),
             "window_batch": window_batch}
    if converged:
        stats.update(best_step=int(run.plateau.best_step), stopped=run.stopped, valid_loss=run.plateau.best,
                     curve=run.curve)
    return stats


def _objective_on(model, layer: int, name: str, ids, x_in, x_orig, replacements: dict) -> LayerObjective:
    """The objective on windows ``ids`` (windows, L): from the block-input rows ``x_in`` /
    ``x_orig`` (windows * L, width), or for logits from residual streams captured here."""
    windows, length = ids.shape
    if name in ("attention", "mlp"):
        return LayerObjective(model, layer, name, x_in.reshape(windows, length, -1), x_orig.reshape(windows, length, -1))
    if layer == 0 and not activations.skip_is_exact(model, ids[0], 0):
        raise ValueError(f"the logits objective cannot start at layer 0 of {type(model).__name__}: fed its own "
                         "embeddings as inputs_embeds the model does not reproduce its logits (it rescales them); "
                         "use --objective attention or qkv for layer 0")
    res_orig = activations.residual_inputs(model, layer, ids)
    if replacements:
        with surgery.swapped(model, replacements):
            res_in = activations.residual_inputs(model, layer, ids)
    else:
        res_in = res_orig
    return LayerObjective(model, layer, name, res_in, res_orig)


def fit_joint(modules: dict, captures, model, spec, seed: int, layer_set, i: int, replacements: dict,
              block: str, *, log, bars: bool = False) -> dict:
    """Fit ``modules = {projection: module}`` of ``layer_set[i]`` jointly to ``block``'s output
    (``attention``: the attention block, ``mlp``: the MLP block, ``logits``: the next-token
    distribution) on the inputs of the network in which ``replacements`` (earlier layers, earlier
    stages of this layer) are installed; returns ``{projection: stats}``, the shared fit statistics
    in each and the test MSE per projection on its own input.

    ``captures`` is the study's captures cache (:class:`galinear.compress.study.captures.Captures`):
    the training rows are read whole, the validation rows (until converged) and the test rows of a
    projection behind the fitted ones come from it. ``log`` takes one line; ``bars`` shows a tqdm bar.
    """
    from galinear.compress.fitting import heldout_error, projection, seeds
    from galinear.compress.methods import targets as targeting

    layer = layer_set[i]
    where = "mlp_in" if block == "mlp" else "attn_in"
    what = ",".join(p.split("_")[0] for p in modules)
    x_in, x_in_test, x_orig, x_orig_test, key = captures.stage_inputs(spec, seed, layer_set, i, where, replacements,
                                                                      whole=True)
    train = _objective_on(model, layer, block, captures.train_ids(), x_in, x_orig, replacements)
    valid = None
    if spec.max_steps:
        xv_in, xv_orig = captures.valid(layer, replacements, key, where)
        valid = _objective_on(model, layer, block, captures.valid_ids(), xv_in, xv_orig, replacements)
    label = f"fit {spec.name} s{seed} L{layer} {what} ({block})" if bars else None
    stats = fit_layer(modules, train, lr=spec.learning_rate, steps=steps_for(len(x_in), spec.epochs, spec.batch_size),
                      seed=seeds.fit_seed(seed, layer), valid=valid, max_steps=spec.max_steps,
                      eval_every=spec.eval_every or 25, patience=spec.patience or 4, progress=label)
    log(projection.summary(f"{spec.tag()} s{seed} L{layer} {what} jointly ({block})", stats))
    installed = {**replacements, **{(layer, p): m for p, m in modules.items()}}
    out = {}
    for proj, module in modules.items():
        if targeting.INPUTS[proj] == where:
            rows, orig_rows = x_in_test, x_orig_test
        else:  # o_proj or down_proj: its own input, behind the modules fitted with it
            rows, orig_rows = captures.test_rows(layer, targeting.INPUTS[proj], installed)
        # one joint fit: each unit holds its share of the time (the study sums "seconds" over units)
        unit = dict(stats, **heldout_error.test_stats(module, models.projection(model, layer, proj), rows, orig_rows),
                    objective_target_mean_square=stats["target_mean_square"], joint_seconds=stats["seconds"],
                    seconds=stats["seconds"] / len(modules))
        if "curve" in unit:  # the learning curve of the joint objective, kept under its own name
            unit["objective_curve"] = unit.pop("curve")
        out[proj] = unit
    return out


def steps_for(rows: int, epochs: float, batch_size: int) -> int:
    """Steps of the projection-wise fit of ``rows`` rows: round(epochs * ceil(rows / batch_size))."""
    return max(1, int(round(epochs * math.ceil(rows / batch_size))))


__all__ = ["BLOCKS", "OBJECTIVES", "LayerObjective", "attention_call", "attention_output", "check_objective",
           "fit_joint", "fit_layer", "mlp_output", "next_token_logits", "steps_for"]
