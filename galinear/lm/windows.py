"""Token windows and a leak-free train / held-out split.

The token stream t_0 .. t_{N-1} is cut into windows of ``window`` tokens starting every
``stride`` tokens: window w covers positions [w*stride, w*stride + window). With stride < window,
neighbouring windows overlap, so a plain random split of windows leaks: a held-out window shares
``window - stride`` positions with its neighbours. Here held-out windows are chosen as seeded
random runs of ``group`` consecutive windows; every training window that shares a single token
position with a held-out window is dropped. Held-out and training positions are then disjoint.

Scoring (standard strided perplexity): inside a run of consecutive held-out windows, the first
window scores all its ``window - 1`` labels and every later window only its last ``stride``
labels, so every held-out token after the first of a run is scored exactly once.

Validation windows (for the stopping rule of :mod:`galinear.compress.fitting.converge`) are drawn from
the training-side windows (no position shared with a held-out window) that were not kept for
fitting; drawing them does not change the training or held-out windows.

Beginning-of-sequence token: a tokenizer that adds one itself (``add_bos_token`` true, e.g.
Gemma's) gets it in front of every window (:func:`bos_token`). The model then sees
``window + 1`` ids per window, the BOS and ``window`` text tokens; the first text token of a run
is scored too (predicted from the BOS), and every held-out text token is still scored once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Windows:
    """Windows over one token stream.

    Attributes
    ----------
    tokens : np.ndarray
        The whole token stream (int64).
    window, stride : int
        Window length and start spacing.
    train, heldout : np.ndarray
        Start positions of the training and held-out windows.
    heldout_first : np.ndarray
        Bool per held-out window: True when it opens a run, i.e. shares no position with the
        previous held-out window (it scores all its labels).
    """

    tokens: np.ndarray
    window: int
    stride: int
    train: np.ndarray
    heldout: np.ndarray
    heldout_first: np.ndarray = field(default=None)
    valid: np.ndarray = field(default=None)
    bos: int | None = None

    def __post_init__(self):
        if self.valid is None:
            self.valid = np.zeros(0, dtype=np.int64)

    @property
    def length(self) -> int:
        """Ids per window as the model sees them: ``window``, plus one with a BOS token."""
        return self.window + (self.bos is not None)

    def batch(self, starts) -> np.ndarray:
        """Token ids of the windows starting at ``starts``: shape (len(starts), length).

        With a BOS token, every window is the BOS followed by ``window`` text tokens.
        """
        if len(starts) == 0:
            return np.zeros((0, self.length), dtype=np.int64)
        rows = np.stack([self.tokens[s:s + self.window] for s in starts]).astype(np.int64)
        if self.bos is not None:
            rows = np.concatenate([np.full((len(rows), 1), self.bos, dtype=np.int64), rows], axis=1)
        return rows

    def score_from(self, index: int) -> int:
        """First label index scored in held-out window ``index`` (labels are positions 1..window-1).

        1 for a window that opens a run; otherwise the first label past the previous held-out
        window's end (``window - stride`` for consecutive windows), so no token is scored twice.
        Indices count in the ids of :meth:`batch` (shifted by one with a BOS token).
        """
        if self.heldout_first[index]:
            return 1
        overlap = int(self.heldout[index - 1]) + self.window - int(self.heldout[index])
        return max(1, overlap + (self.bos is not None))

    def positions(self, starts) -> set:
        """All token positions covered by the windows starting at ``starts``."""
        covered = set()
        for s in starts:
            covered.update(range(int(s), int(s) + self.window))
        return covered


def window_starts(n_tokens: int, window: int = 512, stride: int = 256) -> np.ndarray:
    """Start positions of all full windows: 0, stride, 2*stride, ... with start + window <= n."""
    if window < 2 or stride < 1 or stride > window:
        raise ValueError(f"need window >= 2 and 1 <= stride <= window, got window={window}, stride={stride}")
    if n_tokens < window:
        raise ValueError(f"the text has {n_tokens} tokens, fewer than one window of {window}; "
                         "give a longer text or a smaller window")
    return np.arange(0, n_tokens - window + 1, stride, dtype=np.int64)


def split_windows(tokens, window: int = 512, stride: int = 256, heldout_fraction: float = 0.2,
                  seed: int = 0, group: int = 4, max_train: int | None = None,
                  max_heldout: int | None = None, max_valid: int | None = None,
                  bos: int | None = None) -> Windows:
    """Cut ``tokens`` into windows and split them with no shared token position.

    Parameters
    ----------
    tokens : array of int
        Token stream.
    heldout_fraction : float
        Fraction of window groups held out (at least one group).
    seed : int
        Seed of the random choice of held-out groups and of the sub-sampling.
    group : int
        Held-out windows come in runs of ``group`` consecutive windows; larger runs waste fewer
        training windows (each run costs about ``window/stride - 1`` dropped windows per side).
    max_train, max_heldout : int, optional
        Keep at most this many windows: a seeded random subset of the training windows, and for
        held-out a random subset of whole runs (runs stay contiguous for scoring). Windows of
        runs not kept return to the training pool when they overlap no kept held-out window.
    max_valid : int, optional
        Validation windows: a seeded random subset of the training-pool windows left out of
        ``train`` (none when the pool has no window to spare). Drawn after everything else.
    bos : int, optional
        Beginning-of-sequence id put in front of every window by :meth:`Windows.batch`.
    """
    tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
    starts = window_starts(len(tokens), window, stride)
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must lie in (0, 1), got {heldout_fraction}")
    if group < 1:
        raise ValueError(f"group must be >= 1, got {group}")
    rng = np.random.default_rng(seed)
    n_groups = int(np.ceil(len(starts) / group))
    n_heldout_groups = max(1, int(round(heldout_fraction * n_groups)))
    if n_heldout_groups >= n_groups:
        raise ValueError(f"the text gives only {len(starts)} windows of {window} tokens, too few for a "
                         "train/held-out split; give a longer text")
    chosen = np.sort(rng.choice(n_groups, size=n_heldout_groups, replace=False))
    if max_heldout is not None:
        keep_groups = max(1, int(np.ceil(max_heldout / group)))
        chosen = np.sort(rng.permutation(chosen)[:keep_groups])
    heldout_idx = np.concatenate([np.arange(g * group, min((g + 1) * group, len(starts))) for g in chosen])
    if max_heldout is not None:
        heldout_idx = heldout_idx[:max_heldout]
    heldout = starts[heldout_idx]
    # window [s, s + window) shares a position with [h, h + window) iff |s - h| < window
    train_mask = np.ones(len(starts), dtype=bool)
    for h in heldout:
        train_mask &= np.abs(starts - h) >= window
    pool = train = starts[train_mask]
    if max_train is not None and len(train) > max_train:
        train = np.sort(rng.choice(train, size=max_train, replace=False))
    if len(train) == 0:
        raise ValueError("no training window is left after removing those that overlap held-out "
                         "windows; give a longer text")
    first = np.ones(len(heldout), dtype=bool)
    first[1:] = np.diff(heldout) >= window  # a window overlapping its predecessor continues a run
    valid = np.zeros(0, dtype=np.int64)
    if max_valid:
        spare = np.setdiff1d(pool, train)
        if len(spare):
            valid = np.sort(rng.choice(spare, size=min(max_valid, len(spare)), replace=False))
    return Windows(tokens, window, stride, train, heldout, first, valid, bos)


def bos_token(tokenizer) -> int | None:
    """The id to put in front of every window, or None: the tokenizer's own BOS convention.

    ``add_bos_token`` decides when the tokenizer has it (True for Gemma's, False for SmolLM2's);
    otherwise a probe: the BOS is used when tokenising with special tokens puts ``bos_token_id``
    first and tokenising without them does not.
    """
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return None
    flag = getattr(tokenizer, "add_bos_token", None)
    if isinstance(flag, bool):
        return int(bos) if flag else None
    try:
        with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
        without = tokenizer("a", add_special_tokens=False)["input_ids"]
    except Exception:  # a tokenizer without the keyword: no BOS
        return None
    if with_special and with_special[0] == bos and (not without or without[0] != bos):
        return int(bos)
    return None


def tokenize(tokenizer, text: str, max_tokens: int | None = None) -> np.ndarray:
    """Tokenise ``text`` once (no special tokens), optionally keeping the first ``max_tokens``.

    The BOS token, where the tokenizer wants one, is added per window (:func:`bos_token`).

    Long texts are tokenised in paragraph-aligned pieces so that ``max_tokens`` does not force the
    whole corpus through the tokenizer.
    """
    if not isinstance(text, str) or not text:
        raise ValueError("the text is empty")
    ids: list[int] = []
    piece = 200_000
    pos = 0
    while pos < len(text):
        end = min(len(text), pos + piece)
        if end < len(text):
            cut = text.rfind("\n", pos, end)
            end = cut + 1 if cut > pos else end
        ids.extend(tokenizer(text[pos:end], add_special_tokens=False)["input_ids"])
        pos = end
        if max_tokens is not None and len(ids) >= max_tokens:
            break
    out = np.asarray(ids, dtype=np.int64)
    return out[:max_tokens] if max_tokens is not None else out
