"""Model surgery and activation capture.

``swapped(model, replacements)`` puts replacement modules in place of projections for the
duration of a ``with`` block and always restores the originals. ``capture`` runs windows through
the model and returns, for one decoder layer, either the attention input (the output of the
layer's input norm, i.e. what q_proj / k_proj / v_proj read) or the input of o_proj. The forward
pass is stopped right after the captured point, so layers above it cost nothing.
"""
from __future__ import annotations

import contextlib

import numpy as np

from galinear.compress.models import attention, attention_norm, decoder_layers, projection, set_projection


@contextlib.contextmanager
def swapped(model, replacements: dict):
    """Temporarily replace projections: ``replacements[(layer, "q_proj")] = module``."""
    originals = {}
    try:
        for (layer, name), module in replacements.items():
            originals[(layer, name)] = projection(model, layer, name)
            set_projection(model, layer, name, module)
        yield model
    finally:
        for (layer, name), module in originals.items():
            set_projection(model, layer, name, module)


class _Stop(Exception):
    """Raised by a capture hook to end the forward pass once the wanted tensor is recorded."""


def capture(model, layer: int, token_windows: np.ndarray, where: str = "attn_in",
            progress: str | None = None, batch_size: int = 1):
    """Activations at ``layer`` for every token of every window, as a (windows*length, width) tensor.

    Parameters
    ----------
    where : {"attn_in", "o_in"}
        ``attn_in``: output of the layer's input norm (the q/k/v input). ``o_in``: input of o_proj
        (the concatenated per-head attention outputs).
    progress : str, optional
        Label of the progress display (:class:`galinear.compress.fit.Progress`: a bar on a
        terminal, one line per capture in a log); None for none.
    """
    import torch

    from galinear.compress.fit import progress_steps

    block = decoder_layers(model)[layer]
    if where == "attn_in":
        target = attention_norm(block)
    elif where == "o_in":
        target = attention(block).o_proj
    else:
        raise ValueError(f"where must be 'attn_in' or 'o_in', got {where!r}")
    store = []

    def forward_hook(module, args, output):
        store.append(output.detach().reshape(-1, output.shape[-1]).clone())
        raise _Stop

    def pre_hook(module, args):
        store.append(args[0].detach().reshape(-1, args[0].shape[-1]).clone())
        raise _Stop

    handle = (target.register_forward_hook(forward_hook) if where == "attn_in"
              else target.register_forward_pre_hook(pre_hook))
    try:
        with torch.no_grad():
            starts = range(0, len(token_windows), batch_size)
            bar = progress_steps(len(starts), progress)
            for n, i in enumerate(starts, 1):
                ids = torch.as_tensor(token_windows[i:i + batch_size])
                try:
                    model(input_ids=ids, use_cache=False)
                except _Stop:
                    pass
                else:
                    raise RuntimeError(f"layer {layer}'s {where} was never reached in the forward pass")
                bar.step(n)
            bar.close(f"{len(token_windows)} windows captured")
    finally:
        handle.remove()
    return torch.cat(store, dim=0)


def residual_inputs(model, layer: int, token_windows: np.ndarray, progress: str | None = None):
    """Residual-stream input of decoder layer ``layer`` for each window: (windows, length, width)."""
    import torch

    from galinear.compress.fit import progress_steps

    block = decoder_layers(model)[layer]
    store = []

    def pre_hook(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        store.append(hidden.detach().clone())
        raise _Stop

    handle = block.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        with torch.no_grad():
            bar = progress_steps(len(token_windows), progress)
            for i in range(len(token_windows)):
                try:
                    model(input_ids=torch.as_tensor(token_windows[i:i + 1]), use_cache=False)
                except _Stop:
                    pass
                bar.step(i + 1)
            bar.close(f"{len(token_windows)} windows")
    finally:
        handle.remove()
    return torch.cat(store, dim=0)


@contextlib.contextmanager
def starting_at(model, layer: int):
    """Run only decoder layers ``layer..`` : call ``model(inputs_embeds=residual_at_layer)`` inside.

    The decoder stack is temporarily sliced; position ids and the causal mask are rebuilt from
    the input as usual. Use :func:`skip_is_exact` once per model to check the family supports it.
    """
    base = getattr(model, "model", None)
    if base is None or not hasattr(base, "layers"):
        raise ValueError(f"{type(model).__name__} has no model.layers; starting mid-stack is unsupported")
    import torch

    layers = base.layers
    count = base.config.num_hidden_layers
    base.layers = torch.nn.ModuleList(list(layers)[layer:])
    base.config.num_hidden_layers = len(layers) - layer
    try:
        yield model
    finally:
        base.layers = layers
        base.config.num_hidden_layers = count


def skip_is_exact(model, token_window: np.ndarray, layer: int, atol: float = 1e-4) -> bool:
    """True when running from layer ``layer`` with the captured residual reproduces the full logits."""
    import torch

    try:
        with torch.no_grad():
            full = model(input_ids=torch.as_tensor(token_window[None]), use_cache=False).logits
            hidden = residual_inputs(model, layer, token_window[None])
            with starting_at(model, layer):
                part = model(inputs_embeds=hidden, use_cache=False).logits
        return bool(torch.allclose(full, part, atol=atol, rtol=1e-4))
    except Exception:  # any family-specific failure means: do not skip
        return False
