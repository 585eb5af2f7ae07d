"""ln PPL of a causal language model: the mean negative log-likelihood of every scored token.

For windows w of tokens x_0..x_{L_w-1}, each scored from label index s_w on,

    ln PPL = sum_w sum_{t=s_w}^{L_w-1} -ln p(x_t | x_0..x_{t-1})  /  sum_w (L_w - s_w),

and PPL = exp(ln PPL). Each window is one forward pass (:func:`window_nll`); memory holds one
window's activations and logits at a time. Two ways to choose the windows share one loop:

- :func:`heldout_log_perplexity`: the held-out windows of a :class:`~galinear.lm.windows.Windows`
  (overlapping windows with strided scoring, so every held-out token is scored once:
  :meth:`~galinear.lm.windows.Windows.score_from`);
- :func:`stream_log_perplexity`: a token stream cut into consecutive non-overlapping windows
  (:func:`galinear.lm.wikitext.window_bounds`), every predicted token scored: the WikiText-2
  measure.
"""
from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from galinear._progress import progress_steps
from galinear.lm.models import input_device, starting_at
from galinear.lm.wikitext import DEFAULT_WINDOW, spread, window_bounds

__all__ = ["window_nll", "heldout_log_perplexity", "stream_log_perplexity"]


def window_nll(model, ids, score_from: int, start=None):
    """Sum of -ln p over labels ``score_from..L-1`` of one window, and their count.

    ``start = (layer, residual)`` runs only layers ``layer..`` from the residual-stream input
    ``residual`` (1, L, width) of that layer, which must come from the same model below ``layer``.
    The ids go to the device of the model's input embeddings; the sum is taken where the logits are.
    """
    import torch

    keep = len(ids) - score_from + 1  # logits of positions score_from-1 .. L-1 (the last is unused)
    with torch.no_grad():
        if start is None:
            inputs = {"input_ids": torch.as_tensor(ids).reshape(1, -1).to(input_device(model))}
        else:
            inputs = {"inputs_embeds": start[1]}
        with starting_at(model, start[0]) if start is not None else contextlib.nullcontext():
            try:
                logits = model(**inputs, use_cache=False, logits_to_keep=keep).logits[0]
            except TypeError:  # a family without logits_to_keep
                logits = model(**inputs, use_cache=False).logits[0]
        logits = logits[-keep:-1]
        labels = torch.as_tensor(ids[score_from:]).long().to(logits.device)
        # -ln p = logsumexp(logits) - logit of the label, per scored position
        scored = (torch.logsumexp(logits, dim=-1) - logits.gather(1, labels[:, None])[:, 0]).double()
    return float(scored.sum()), int(scored.numel())


def _score(model, windows, count: int, progress: str | None, what: str = "") -> tuple[float, int, float]:
    """(sum of -ln p, scored tokens, seconds) over ``count`` windows, each a triple
    ``(ids, score_from, start)`` for :func:`window_nll`, run one at a time."""
    total, tokens = 0.0, 0
    bar = progress_steps(count, progress)
    t0 = time.perf_counter()
    for i, (ids, score_from, start) in enumerate(windows):
        nll, n = window_nll(model, ids, score_from, start)
        total, tokens = total + nll, tokens + n
        left = (time.perf_counter() - t0) / (i + 1) * (count - i - 1)
        bar.step(i + 1, f"ln PPL {total / max(tokens, 1):.4f}, ETA {_duration(left)}")
    seconds = time.perf_counter() - t0
    bar.close(f"ln PPL {total / max(tokens, 1):.4f} on {tokens:,} tokens{what}")
    return total, tokens, seconds


def heldout_log_perplexity(model, windows, progress: str | None = None, start=None) -> dict:
    """ln PPL of ``model`` on the held-out windows of a :class:`~galinear.lm.windows.Windows`.

    ``start = (layer, residuals)`` with residuals (windows, L, width): skip the layers below
    ``layer`` (their output is given). Returns ``{"log_ppl", "nll_sum", "tokens", "windows"}``.
    """
    ids = windows.batch(windows.heldout)
    rows = ((ids[i], windows.score_from(i), None if start is None else (start[0], start[1][i:i + 1]))
            for i in range(len(ids)))
    total, count, _ = _score(model, rows, len(ids), progress)
    return {"log_ppl": total / count, "nll_sum": total, "tokens": count, "windows": len(ids)}


def _window(ids: np.ndarray, start: int, stop: int, bos: int | None) -> np.ndarray:
    part = np.asarray(ids[start:stop], dtype=np.int64)
    return part if bos is None else np.concatenate([[bos], part]).astype(np.int64)


def stream_log_perplexity(model, ids: np.ndarray, length: int = DEFAULT_WINDOW, bos: int | None = None,
                          progress: str | None = None, max_windows: int | None = None,
                          windows: int | None = None) -> dict:
    """ln PPL of ``model`` over the consecutive windows of ``length`` tokens of the stream ``ids``
    (:func:`~galinear.lm.wikitext.window_bounds`; ``bos`` in front of each window when given).

    Returns ``{"log_ppl", "nll_sum", "tokens", "windows", "window", "of", "seconds"}``; ``tokens``
    counts the predicted tokens. ``max_windows`` scores only the first windows (a timing probe);
    ``windows`` scores that many windows spread evenly over the stream
    (:func:`~galinear.lm.wikitext.spread`). Either makes the result a subset, not the standard
    measure; ``"of"`` says how many windows the whole stream has.
    """
    every = window_bounds(len(ids), length, bos)
    bounds = spread(every, windows)
    if max_windows is not None:
        bounds = bounds[:max_windows]
    rows = ((_window(ids, start, stop, bos), 1, None) for start, stop in bounds)
    total, count, seconds = _score(model, rows, len(bounds), progress, f", {len(bounds)} windows of {length}")
    return {"log_ppl": total / count, "nll_sum": total, "tokens": count, "windows": len(bounds), "window": length,
            "of": len(every), "seconds": seconds}


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
