"""The standard measure: token-level perplexity over the whole WikiText-2 (raw) test split.

The split ships with galinear (``galinear/data/wikitext2/wiki.test.raw``, CC BY-SA 3.0 / GFDL,
its notice beside it); its SHA-256 is checked on every read, so a damaged or edited copy is
refused with the fix rather than giving another number. A user with a network may take the hub
dataset instead (``source="hub"``: ``wikitext``, ``wikitext-2-raw-v1``, split ``test``, through
the ``datasets`` package); it is never used by default.

Protocol (as in the compression literature):

- the text (CRLF line ends read as ``\\n``) is tokenised once, without special tokens; the ids
  are cached on disk keyed on the tokenizer and the text (:func:`token_ids`);
- the ids are cut into consecutive, non-overlapping windows of ``length`` tokens (2,048, or the
  model's context limit when smaller; one less when the tokenizer puts a BOS token in front of
  every window); the last, shorter window is kept, so every token of the split is in a window;
- every window is scored on all its predicted tokens: each token but the window's first (with a
  BOS: every token), predicted from the tokens before it in the window;
- ln PPL = total negative log-likelihood / number of predicted tokens; PPL = exp(ln PPL).

Windows are scored one at a time (:func:`galinear.lm.perplexity.stream_log_perplexity`), so
memory holds one window's activations and logits, never the split's. Calibration never uses this text: a ``--text`` file
whose bytes are this split is refused (:func:`check_not_wikitext`).
"""
from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

from galinear import _io
from galinear.lm import sources
from galinear.lm import windows as win

NAME = "wikitext2"
TITLE = "WikiText-2 test"
FILE = "wiki.test.raw"
SHA256 = "4f3e427e4aff23acff917a8a51aeae21bf12832256e26914c8fc250dcef4103c"
DEFAULT_WINDOW = 2048
SOURCES = ("auto", "file", "hub", "off")
_REINSTALL = ("reinstall galinear (`pip install --force-reinstall --no-deps galinear`, or restore "
              "galinear/data/wikitext2/wiki.test.raw from the repository with its line endings unchanged)")


def data_path() -> str:
    """Where the packaged split lives: ``galinear/data/wikitext2/wiki.test.raw``."""
    import galinear.data

    return os.path.join(os.path.dirname(os.path.abspath(galinear.data.__file__)), "wikitext2", FILE)


def available(path: str | None = None) -> bool:
    """Whether the packaged split (or ``path``) is present; its checksum is checked when it is read."""
    return os.path.isfile(path or data_path())


def check_source(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"the WikiText-2 source must be one of {', '.join(SOURCES)}, got {source!r}")
    return source


def check_ready(source: str) -> str:
    """Refuse, before any model loads, a source that cannot be read here: an unknown one, ``file``
    when the packaged split is missing, ``hub`` without the ``datasets`` package or with
    HF_HUB_OFFLINE=1. Returns ``source``."""
    check_source(source)
    if source == "file":
        _check_file(data_path())
    elif source == "hub":
        _check_hub()
    return source


def _check_file(path: str) -> None:
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found: the WikiText-2 test split that ships with galinear is missing; "
                         f"{_REINSTALL}, or evaluate without it (--wikitext off), or with a network take the "
                         "hub dataset (--wikitext hub)")


def _check_hub() -> None:
    import importlib.util

    if importlib.util.find_spec("datasets") is None:
        raise ValueError("--wikitext hub needs the `datasets` package: `pip install datasets` (with a network), "
                         "or use the split that ships with galinear (--wikitext file)")
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ValueError("HF_HUB_OFFLINE=1 forbids downloading WikiText-2 from the hub (--wikitext hub); set "
                         "HF_HUB_OFFLINE=0 with a network, or use the split that ships with galinear (--wikitext file)")


def read_file(path: str | None = None) -> str:
    """The packaged split as text, after checking its SHA-256; ValueError with the fix otherwise."""
    path = path or data_path()
    _check_file(path)
    with open(path, "rb") as handle:
        raw = handle.read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        raise ValueError(f"{path} is damaged or changed: its SHA-256 is {digest}, the WikiText-2 test split's is "
                         f"{SHA256} ({len(raw):,} bytes read, 1,290,547 expected); {_REINSTALL}")
    return raw.decode("utf-8").replace("\r\n", "\n")


def read_hub() -> str:
    """The same split from the Hugging Face hub (needs a network, ``datasets`` and HF_HUB_OFFLINE unset or 0)."""
    _check_hub()
    from datasets import load_dataset

    rows = load_dataset("wikitext", "wikitext-2-raw-v1", split="test")["text"]
    return "".join(rows)


def load_text(source: str = "file") -> str:
    """The test split as one string: ``file`` (packaged, checked) or ``hub``."""
    check_source(source)
    if source == "hub":
        return read_hub()
    if source == "off":
        raise ValueError("the WikiText-2 evaluation is off (source 'off')")
    return read_file()


def check_not_wikitext(paths) -> None:
    """Refuse calibration text files whose bytes are the WikiText-2 test split (the evaluation would leak)."""
    for path in paths:
        if os.path.isfile(path) and os.path.getsize(path) == 1_290_547:
            with open(path, "rb") as handle:
                if hashlib.sha256(handle.read()).hexdigest() == SHA256:
                    raise ValueError(f"{path} is the WikiText-2 test split, the evaluation text: calibrating on it "
                                     "would leak; give another text")


# ---------------------------------------------------------------------------------------- tokens
def tokenizer_key(tokenizer) -> str:
    """16 hex digits naming what a tokenizer does: its full serialisation (fast tokenizers), else its
    vocabulary, else its ids for a probe text."""
    h = hashlib.sha256(f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}".encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        h.update(backend.to_str().encode())
    elif hasattr(tokenizer, "get_vocab"):
        h.update(json.dumps(sorted(tokenizer.get_vocab().items()), default=str).encode())
    else:
        probe = "".join(chr(c) for c in range(32, 1024)) + " = Valkyria Chronicles III = \n"
        h.update(repr(tokenizer(probe, add_special_tokens=False)["input_ids"]).encode())
    return h.hexdigest()[:16]


def _prefix_check(tokenizer, text: str) -> np.ndarray:
    """Ids of the text's first lines (up to a newline near 4,000 characters): checked against a cache."""
    cut = text.rfind("\n", 0, 4000)
    head = text[:cut + 1] if cut > 0 else text[:4000]
    ids = np.asarray(tokenizer(head, add_special_tokens=False)["input_ids"], dtype=np.int64)
    return ids[:max(1, len(ids) - 8)]  # the last few may merge with what follows the cut


def token_ids(tokenizer, text: str, cache_dir: str | None = None, log=None) -> np.ndarray:
    """The text's token ids (int64), tokenised once and cached as a state file under ``cache_dir``
    (default ``$GALINEAR_CACHE/wikitext2``), keyed on the tokenizer and the text's SHA-256."""
    text_sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    folder = cache_dir or os.path.join(sources.cache_root(), NAME)
    path = os.path.join(folder, f"ids-{tokenizer_key(tokenizer)}-{text_sha[:16]}.safetensors")
    cached = _io.load_cache(path)  # a damaged cache is removed (with a message) and rebuilt
    check = _prefix_check(tokenizer, text)
    if cached is not None:
        ids = np.asarray(cached["ids"], dtype=np.int64)
        if cached.get("text_sha256") == text_sha and np.array_equal(ids[:len(check)], check):
            return ids
        if log:
            log(f"{path} does not match this tokenizer and text; tokenising again")
    t0 = time.perf_counter()
    ids = win.tokenize(tokenizer, text)
    _io.save_state(path, {"ids": ids, "text_sha256": text_sha, "tokens": int(len(ids))})
    if log:
        log(f"WikiText-2 tokenised: {len(ids):,} tokens in {time.perf_counter() - t0:.1f} s (cached in {path})")
    return ids


# ---------------------------------------------------------------------------------------- windows
def window_length(model, requested: int = DEFAULT_WINDOW, bos: int | None = None) -> int:
    """Text tokens per window: ``requested``, or less where the model's context (with the BOS) is shorter."""
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 2:
        raise ValueError(f"the WikiText-2 window must be an integer >= 2 (tokens), got {requested!r}")
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(limit, int) and limit > 0:
        return max(2, min(requested, limit - (bos is not None)))
    return requested


def window_bounds(n_tokens: int, length: int, bos: int | None = None) -> list:
    """(start, stop) of the consecutive non-overlapping windows covering ``n_tokens`` ids; the last may
    be shorter (kept when it predicts a token: 2 ids, or 1 with a BOS)."""
    if n_tokens < 1:
        raise ValueError("the WikiText-2 ids are empty")
    out = [(s, min(s + length, n_tokens)) for s in range(0, n_tokens, length)]
    if out[-1][1] - out[-1][0] < (1 if bos is not None else 2):
        out.pop()
    return out


def spread(bounds: list, count: int | None) -> list:
    """``count`` of ``bounds`` evenly spaced over the split (the first and the last among them), in
    order; all of them when ``count`` is None or not smaller. A stated subset for quick comparisons:
    the standard measure is the whole split."""
    if count is None or count >= len(bounds):
        return list(bounds)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"the WikiText-2 window count must be a positive integer, got {count!r}")
    if count == 1:
        return [bounds[0]]
    picks = sorted({round(i * (len(bounds) - 1) / (count - 1)) for i in range(count)})
    return [bounds[i] for i in picks]


def describe(ids, length: int, bos: int | None, windows: int | None, source: str) -> dict:
    """What an evaluation of ``ids`` scores: the split's size, its window count ``of`` and the
    ``windows`` scored (all, or :func:`spread`'s subset) with their ``scored_tokens``."""
    every = window_bounds(len(ids), length, bos)
    scored = spread(every, windows)
    return {"source": source, "tokens": int(len(ids)), "window": length, "windows": len(scored), "of": len(every),
            "scored_tokens": int(sum(stop - start for start, stop in scored))}


def summary(info: dict) -> str:
    """One line naming the split, its windows and, for a subset, how many are scored."""
    subset = (f"; {info['windows']} of them scored, spread evenly over the split (--wikitext-windows)"
              if info["windows"] < info["of"] else "")
    return (f"WikiText-2 test split ({info['source']}): {info['tokens']:,} tokens in {info['of']} non-overlapping "
            f"windows of {info['window']}, every predicted token scored{subset}")


__all__ = ["NAME", "TITLE", "SHA256", "DEFAULT_WINDOW", "SOURCES", "data_path", "available", "check_source",
           "read_file", "read_hub", "load_text", "check_not_wikitext", "tokenizer_key", "token_ids",
           "window_length", "window_bounds", "spread", "describe", "summary"]
