"""Causal language models as the compression and the training commands both use them.

- :mod:`galinear.lm.models`: :func:`load_model` (any Hugging Face causal LM with split
  q_proj/k_proj/v_proj/o_proj: a local folder, a GGUF file, or the embedded
  SmolLM2-135M-Instruct), :func:`check_model`, and access to decoder layers and projections;
- :mod:`galinear.lm.windows`: :func:`tokenize` and :func:`split_windows` (token windows with a
  leak-free train / held-out split);
- :mod:`galinear.lm.wikitext`: the WikiText-2 test split that ships with galinear, checked and
  tokenised once;
- :mod:`galinear.lm.perplexity`: ln PPL, on held-out windows
  (:func:`heldout_log_perplexity`) or on a token stream (:func:`stream_log_perplexity`);
- :mod:`galinear.lm.optimise`: the optimiser loop (:func:`~galinear.lm.optimise.train`) of every
  gradient fit of compress and of the train commands' runs, with its optimisers, schedule,
  mini-batches and stopping rule;
- :mod:`galinear.lm.threads`: :class:`~galinear.lm.threads.ThreadGovernor`, the loop's thread
  count chosen from its step times (``--threads auto``).

torch and transformers load on the first call that needs them, not on import.
"""
from galinear.lm.models import LoadedModel, check_model, load_model
from galinear.lm.perplexity import heldout_log_perplexity, stream_log_perplexity
from galinear.lm.windows import Windows, split_windows, tokenize

__all__ = ["LoadedModel", "check_model", "load_model", "Windows", "split_windows", "tokenize",
           "heldout_log_perplexity", "stream_log_perplexity"]
