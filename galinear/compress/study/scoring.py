"""Where a study measures ln PPL: the WikiText-2 test split (tokenised once, its ids cached beside
the study's cache; the whole split or ``--wikitext-windows`` of its windows spread evenly) and the
held-out windows of every text. Plain functions of the model, the windows and the settings.
"""
from __future__ import annotations

from dataclasses import dataclass

from galinear.lm import perplexity, wikitext

__all__ = ["WikiText", "eval_datasets", "evaluated", "log_perplexity", "setup_wikitext"]


@dataclass(frozen=True)
class WikiText:
    """The tokenised WikiText-2 test split a study scores on: its ``ids``, the ``window`` length,
    its ``source`` ("file" or "hub"), ``info`` (:func:`galinear.lm.wikitext.describe`) and ``bos``
    (the BOS id every window starts with, or None)."""

    ids: object
    window: int
    source: str
    info: dict
    bos: int | None


def setup_wikitext(config, tokenizer, model, store, bos, log) -> WikiText | None:
    """Tokenise the WikiText-2 test split once (ids cached beside the study's cache,
    :meth:`galinear.compress.storage.store.Store.wikitext_folder`); None when ``config.wikitext`` is
    "off", or "auto" and the split is not installed."""
    source = config.wikitext
    if source == "off":
        return None
    if source == "auto":
        if not wikitext.available():
            log(f"the WikiText-2 test split is not installed ({wikitext.data_path()}): ln PPL on the texts only")
            return None
        source = "file"
    ids = wikitext.token_ids(tokenizer, wikitext.load_text(source), store.wikitext_folder(), log=log)
    window = wikitext.window_length(model, config.wikitext_window, bos)
    info = wikitext.describe(ids, window, bos, config.wikitext_windows, source)
    log(wikitext.summary(info))
    return WikiText(ids, window, source, info, bos)


def eval_datasets(wiki: WikiText | None, windows: dict) -> list:
    """What ln PPL is measured on: the whole WikiText-2 test split (when on) first, then the texts."""
    return ([wikitext.NAME] if wiki is not None else []) + list(windows)


def evaluated(entries: dict, key: str, wiki: WikiText | None) -> bool:
    """Whether ``entries`` (results.json's) hold ``key``, measured on the WikiText-2 windows of now."""
    entry = entries.get(key)
    if entry is None:
        return False
    if entry.get("dataset") != wikitext.NAME:
        return True
    return wiki is not None and (
        entry.get("window") == wiki.window and entry.get("windows", wiki.info["of"]) == wiki.info["windows"])


def log_perplexity(model, dataset: str, *, wiki: WikiText | None, windows: dict, wikitext_windows: int | None,
                   progress: str | None = None, start=None) -> dict:
    """ln PPL of ``model`` as it stands on ``dataset`` (WikiText-2 or a text's held-out windows).

    ``start``: (layer, residual inputs of the held-out windows) to skip the untouched lower layers
    (:meth:`galinear.compress.study.captures.Captures.start`); the texts only."""
    if dataset == wikitext.NAME:
        res = perplexity.stream_log_perplexity(model, wiki.ids, wiki.window, wiki.bos, progress=progress,
                                               windows=wikitext_windows)
        return dict(res, source=wiki.source)
    return perplexity.heldout_log_perplexity(model, windows[dataset], progress=progress, start=start)
