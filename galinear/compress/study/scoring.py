"""Where a :class:`~galinear.compress.study.run.Study` measures ln PPL (a base class of it): the
WikiText-2 test split (tokenised once, its ids cached beside the study's cache; the whole split or
``--wikitext-windows`` of its windows spread evenly) and the held-out windows of every text.
"""
from __future__ import annotations

from galinear.lm import perplexity, wikitext

__all__ = ["ScoringMethods"]


class ScoringMethods:
    """ln PPL of the model as it stands, on every dataset a study reports."""

    def _setup_wikitext(self) -> None:
        """Tokenise the WikiText-2 test split once (ids cached beside the study's cache), unless off."""
        source = self.config.wikitext
        if source == "off":
            return
        if source == "auto":
            if not wikitext.available():
                self.log(f"the WikiText-2 test split is not installed ({wikitext.data_path()}): ln PPL on the texts only")
                return
            source = "file"
        ids = wikitext.token_ids(self.loaded.tokenizer, wikitext.load_text(source), self.store.wikitext_folder(),
                                 log=self.log)
        self.wikitext_ids, self.wikitext_source = ids, source
        self.wikitext_window = wikitext.window_length(self.model, self.config.wikitext_window, self._bos)
        self.wikitext_info = wikitext.describe(ids, self.wikitext_window, self._bos, self.config.wikitext_windows,
                                               source)
        self.log(wikitext.summary(self.wikitext_info))

    @property
    def eval_datasets(self) -> list:
        """What ln PPL is measured on: the whole WikiText-2 test split (when on) first, then the texts."""
        return ([wikitext.NAME] if self.wikitext_ids is not None else []) + list(self.windows)

    def _evaluated(self, key: str) -> bool:
        entry = self.results["entries"].get(key)
        if entry is None:
            return False
        return entry.get("dataset") != wikitext.NAME or (
            entry.get("window") == self.wikitext_window
            and entry.get("windows", self.wikitext_info["of"]) == self.wikitext_info["windows"])

    def _log_perplexity(self, dataset: str, label: str, layer_set=None) -> dict:
        """ln PPL of the model as it stands on ``dataset`` (WikiText-2 or a text's held-out windows)."""
        progress = label if self._bars else None
        if dataset == wikitext.NAME:
            res = perplexity.stream_log_perplexity(self.model, self.wikitext_ids, self.wikitext_window, self._bos,
                                                   progress=progress, windows=self.config.wikitext_windows)
            return dict(res, source=self.wikitext_source)
        start = None if layer_set is None else self._start(dataset, layer_set[0])
        return perplexity.heldout_log_perplexity(self.model, self.windows[dataset], progress=progress, start=start)
