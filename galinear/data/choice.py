"""A multiple-choice task built offline from a held-out text: which of four sentences comes next.

The accuracy rows of compression papers come from hub tasks (ARC, HellaSwag, PIQA) that cannot be
read without a network. This module builds a task of the same form from a text that is on disk:
each item is one or two consecutive sentences of a paragraph (the context), the sentence that
follows them in that paragraph (the answer), and three sentences drawn from other paragraphs with
a length within a stated ratio of the answer's (so that the sum of log-likelihoods cannot win by
length alone). It is a next-sentence test of coherence, not a reasoning benchmark, and is reported
as such.

:func:`write_lm_eval_task` writes the items as a JSONL file with the YAML task definition that
lm-eval (``lm-eval`` on PyPI) reads from a local folder, so ``simple_evaluate`` or ``lm_eval
--include_path`` scores any model on it without a hub.
"""
from __future__ import annotations

import json
import os
import re

__all__ = ["sentences", "paragraphs", "next_sentence_items", "write_lm_eval_task"]

# a sentence ends at . ! or ? followed by a space and a capital letter, digit or quote; WikiText's
# tokenised form (" . ") is covered, abbreviations such as "U.S. Army" are not split
_END = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")
_HEADING = re.compile(r"^\s*=.*=\s*$")
_DETOKENISE = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" , ", ", "), (" . ", ". "), (" ; ", "; "),
               (" : ", ": "), (" 's", "'s"), ("( ", "("), (" )", ")"))


def _clean(text: str) -> str:
    """WikiText's tokenised spacing undone (``" @-@ "`` -> ``"-"``, ``" , "`` -> ``", "``), spaces collapsed."""
    text = " " + " ".join(text.split()) + " "
    for old, new in _DETOKENISE:
        text = text.replace(old, new)
    return " ".join(text.split()).replace(" .", ".").replace(" !", "!").replace(" ?", "?")


def paragraphs(text: str) -> list[str]:
    """The paragraphs of ``text`` (blank-line or line separated), headings (``= Title =``) dropped."""
    out = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip() or _HEADING.match(line):
            continue
        out.append(_clean(line))
    return out


def sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph, in order."""
    return [s.strip() for s in _END.split(paragraph) if s.strip()]


def next_sentence_items(text: str, count: int, seed: int = 0, context_sentences: int = 2,
                        min_words: int = 6, max_words: int = 40, length_ratio: float = 1.5,
                        choices: int = 4) -> list[dict]:
    """``count`` items ``{"context", "choices", "label"}`` from ``text`` (see the module docstring).

    The answer is a sentence of ``min_words``..``max_words`` words that follows at least one sentence
    in its paragraph; the context is the ``context_sentences`` sentences before it (fewer at the
    start of a paragraph); the ``choices - 1`` distractors are sentences of other paragraphs whose
    word count is within ``length_ratio`` of the answer's. The label's position is drawn uniformly.
    Deterministic for a given text and ``seed``; ValueError when the text is too short for ``count``.
    """
    import numpy as np

    for name, value, low in (("count", count, 1), ("context_sentences", context_sentences, 1),
                             ("min_words", min_words, 1), ("choices", choices, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not (isinstance(max_words, int) and max_words >= min_words):
        raise ValueError(f"max_words must be an integer >= min_words ({min_words}), got {max_words!r}")
    if not (isinstance(length_ratio, (int, float)) and length_ratio >= 1):
        raise ValueError(f"length_ratio must be a number >= 1, got {length_ratio!r}")
    split = [sentences(p) for p in paragraphs(text)]
    pool = [(i, s, len(s.split())) for i, group in enumerate(split) for s in group
            if min_words <= len(s.split()) <= max_words]
    answers = [(i, j) for i, group in enumerate(split) for j in range(1, len(group))
               if min_words <= len(group[j].split()) <= max_words]
    if len(answers) < count:
        raise ValueError(f"the text holds {len(answers)} sentences that can be asked for (a sentence of "
                         f"{min_words}-{max_words} words after another in its paragraph), fewer than the {count} "
                         "items asked; ask for fewer or give a longer text")
    rng = np.random.default_rng(seed)
    words = np.array([w for _, _, w in pool])
    owner = np.array([i for i, _, _ in pool])
    items = []
    for pick in rng.permutation(len(answers)):
        if len(items) == count:
            break
        i, j = answers[pick]
        answer = split[i][j]
        n = len(answer.split())
        fits = np.nonzero((owner != i) & (words * length_ratio >= n) & (words <= n * length_ratio))[0]
        distinct = list(dict.fromkeys(pool[k][1] for k in fits if pool[k][1] != answer))
        if len(distinct) < choices - 1:
            continue
        others = [distinct[k] for k in rng.choice(len(distinct), size=choices - 1, replace=False)]
        label = int(rng.integers(choices))
        options = others[:label] + [answer] + others[label:]
        context = " ".join(split[i][max(0, j - context_sentences):j])
        items.append({"context": context, "choices": options, "label": label})
    if len(items) < count:
        raise ValueError(f"only {len(items)} of the {count} items found distractors of a similar length; "
                         "ask for fewer, raise length_ratio or give a longer text")
    return items


def write_lm_eval_task(folder: str, items: list[dict], name: str = "next_sentence") -> str:
    """Write ``items`` as ``folder/NAME.jsonl`` and the lm-eval task ``folder/NAME.yaml`` (accuracy
    and length-normalised accuracy; the continuation is scored after one space). Returns ``folder``,
    the path to give lm-eval's ``TaskManager(include_path=...)`` or ``--include_path``."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
        raise ValueError(f"task name {name!r} must be letters, digits and underscores, starting with a letter")
    os.makedirs(folder, exist_ok=True)
    data = os.path.abspath(os.path.join(folder, f"{name}.jsonl"))
    with open(data, "w", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items))
    cache = os.path.abspath(os.path.join(folder, "datasets-cache"))
    with open(os.path.join(folder, f"{name}.yaml"), "w", encoding="utf-8") as handle:
        handle.write(f"task: {name}\n"
                     "dataset_path: json\n"
                     "dataset_kwargs:\n"
                     f"  data_files: {{test: {json.dumps(data)}}}\n"
                     f"  cache_dir: {json.dumps(cache)}\n"
                     "test_split: test\n"
                     "output_type: multiple_choice\n"
                     "doc_to_text: '{{context}}'\n"
                     "doc_to_choice: '{{choices}}'\n"
                     "doc_to_target: label\n"
                     "metric_list:\n"
                     "  - metric: acc\n"
                     "  - metric: acc_norm\n")
    return folder
