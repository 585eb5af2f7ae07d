"""Causal language models as the compression and the training commands both use them.

- :mod:`galinear.lm.sources`: where a model comes from: the named, offline models (the embedded
  default SmolLM2-135M-Instruct, Gemma-3-270M), folders and GGUF files (:func:`named_source`),
  and galinear's cache folder;
- :mod:`galinear.lm.models`: :func:`load_model` (any Hugging Face causal LM with split
  q_proj/k_proj/v_proj/o_proj, from any source), :func:`check_model`, and access to decoder
  layers and projections;
- :mod:`galinear.lm.windows`: :func:`tokenize` and :func:`split_windows` (token windows with a
  leak-free train / held-out split);
- :mod:`galinear.lm.wikitext`: the WikiText-2 test split that ships with galinear, checked and
  tokenised once;
- :mod:`galinear.lm.perplexity`: ln PPL, on held-out windows
  (:func:`heldout_log_perplexity`) or on a token stream (:func:`stream_log_perplexity`).

The optimiser loop and its thread governor are :mod:`galinear.optim`'s.
torch and transformers load on the first call that needs them, not on import.
"""
from galinear.lm.models import LoadedModel, check_model, load_model
from galinear.lm.perplexity import heldout_log_perplexity, stream_log_perplexity
from galinear.lm.windows import Windows, split_windows, tokenize

__all__ = ["LoadedModel", "check_model", "load_model", "Windows", "split_windows", "tokenize",
           "heldout_log_perplexity", "stream_log_perplexity"]
