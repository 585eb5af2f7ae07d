"""Model folders for tests of the routes that read a model from disk (``from_pretrained``, lm-eval):
a tiny random Llama saved with ``save_pretrained`` (safetensors) beside a character-level fast
tokenizer built in memory. No download anywhere."""
from __future__ import annotations

import os

__all__ = ["char_tokenizer", "tiny_model_folder", "TOKENIZER_CHARACTERS"]

#: The characters the tokenizer knows, after the special tokens <unk> (0), <s> (1) and </s> (2).
TOKENIZER_CHARACTERS = "abcdefghijklmnopqrstuvwxyz .,?!'"


def char_tokenizer():
    """A ``transformers.PreTrainedTokenizerFast`` with one token per character (ids below 64, the
    vocabulary of :func:`galinear.testing.models.tiny_llama`), BOS ``<s>``, EOS ``</s>``."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({c: 3 + i for i, c in enumerate(TOKENIZER_CHARACTERS)})
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def tiny_model_folder(path, layers: int = 2, seed: int = 0) -> str:
    """Write :func:`galinear.testing.models.tiny_llama` (``layers``, ``seed``) and
    :func:`char_tokenizer` to ``path`` with ``save_pretrained``; returns the path as a string."""
    from galinear.testing.models import tiny_llama

    path = os.fspath(path)
    tiny_llama(layers=layers, seed=seed).save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    return path
