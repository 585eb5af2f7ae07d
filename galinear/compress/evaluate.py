"""Held-out log-perplexity and regression error.

For held-out windows w with tokens x_0..x_{L-1} and first scored label index s_w (1 for the
first window of a run, L - stride for the others), the log-perplexity is

    ln PPL = sum_w sum_{t=s_w}^{L-1} -ln p(x_t | x_0..x_{t-1})  /  sum_w (L - s_w),

i.e. the mean negative log-likelihood of every scored token. The original model and all
compressed models are scored on the same windows.
"""
from __future__ import annotations

import math

from galinear.compress.progress import progress_steps


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def window_nll(model, ids, score_from: int, start=None):
    """Sum of -ln p over labels ``score_from..L-1`` of one window, and their count.

    ``start = (layer, residual)`` runs only layers ``layer..`` from the residual-stream input
    ``residual`` (1, L, width) of that layer, which must come from the same model below ``layer``.
    """
    import torch

    from galinear.compress.activations import starting_at

    keep = len(ids) - score_from + 1  # logits of positions score_from-1 .. L-1 (the last is unused)
    with torch.no_grad():
        if start is None:
            inputs = {"input_ids": torch.as_tensor(ids).reshape(1, -1)}
        else:
            inputs = {"inputs_embeds": start[1]}
        with starting_at(model, start[0]) if start is not None else _nothing():
            try:
                logits = model(**inputs, use_cache=False, logits_to_keep=keep).logits[0]
            except TypeError:  # a family without logits_to_keep
                logits = model(**inputs, use_cache=False).logits[0]
        logits = logits[-keep:-1]
        labels = torch.as_tensor(ids[score_from:]).long()
        # -ln p = logsumexp(logits) - logit of the label, per scored position
        scored = (torch.logsumexp(logits, dim=-1) - logits.gather(1, labels[:, None])[:, 0]).double()
    return float(scored.sum()), int(scored.numel())


def log_perplexity(model, windows, progress: str | None = None, start=None) -> dict:
    """ln PPL of ``model`` on the held-out windows of a :class:`~galinear.compress.windows.Windows`.

    ``start = (layer, residuals)`` with residuals (windows, L, width): skip the layers below
    ``layer`` (their output is given). Returns ``{"log_ppl", "nll_sum", "tokens", "windows"}``.
    """
    total, count = 0.0, 0
    ids = windows.batch(windows.heldout)
    bar = progress_steps(len(ids), progress)
    for i in range(len(ids)):
        here = None if start is None else (start[0], start[1][i:i + 1])
        s, n = window_nll(model, ids[i], windows.score_from(i), here)
        total += s
        count += n
        bar.step(i + 1)
    bar.close(f"ln PPL {total / max(count, 1):.4f} on {count} tokens")
    return {"log_ppl": total / count, "nll_sum": total, "tokens": count, "windows": len(ids)}


def log_perplexity_direct(model, windows) -> float:
    """The same ln PPL computed token by token: each scored token is predicted from its own prefix.

    For every scored label t of held-out window w, the model is run on x_{start_w}..x_{t-1} alone
    and the last position's distribution scores x_t. Quadratic in the window length: a check for
    tiny models, not for real use.
    """
    import torch

    total, count = 0.0, 0
    for i, start in enumerate(windows.heldout):
        tokens = windows.batch([start])[0]  # with the BOS token where the tokenizer uses one
        for t in range(windows.score_from(i), len(tokens)):
            with torch.no_grad():
                logits = model(input_ids=torch.as_tensor(tokens[:t]).reshape(1, -1), use_cache=False).logits
            logp = torch.log_softmax(logits[0, -1].double(), dim=-1)
            total -= float(logp[int(tokens[t])])
            count += 1
    return total / count


def perplexity(log_ppl: float) -> float:
    """PPL = exp(ln PPL)."""
    return math.exp(log_ppl)


def mse(module, inputs, targets, batch_size: int = 4096) -> float:
    """Mean squared error of ``module(inputs)`` against ``targets`` over all entries."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(inputs), batch_size):
            diff = module(inputs[i:i + batch_size]) - targets[i:i + batch_size]
            total += float(diff.double().pow(2).sum())
            count += diff.numel()
    return total / max(count, 1)


def projection_target(inputs, projection):
    """What the (original) ``projection`` (an nn.Linear) gives on ``inputs``: x W^T (+ b)."""
    return inputs @ projection.weight.T + (0 if projection.bias is None else projection.bias)


def test_stats(module, original, inputs, original_inputs) -> dict:
    """The held-out numbers of a replacement ``module`` of the projection ``original``: ``test_mse``
    (``module(inputs)`` against the original on ``original_inputs``), ``target_mean_square`` (of
    that target: the MSE of predicting 0), ``params`` and ``dense_params`` (the original's)."""
    from galinear.compress.methods import count_parameters

    target = projection_target(original_inputs, original)
    return {"test_mse": mse(module, inputs, target), "target_mean_square": float(target.double().pow(2).mean()),
            "params": count_parameters(module), "dense_params": count_parameters(original)}


__all__ = ["window_nll", "log_perplexity", "log_perplexity_direct", "perplexity", "mse", "projection_target",
           "test_stats"]
