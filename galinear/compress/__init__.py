"""Layer-wise compression of a causal LM's attention projections (q/k/v) by rotor networks.

The paper's protocol (Pence, Yamada, Singh, "Composing Linear Layers from Irreducibles",
NeurIPS 2025, arXiv 2507.11688), with the leaks of its reference code fixed. Main entry points:

- :class:`StudyConfig`, :class:`Study`: capture, fit, evaluate and report, resumable;
- :func:`load_model`: any Hugging Face causal LM with q_proj/k_proj/v_proj/o_proj (local folder,
  GGUF file, or the embedded SmolLM2-135M-Instruct);
- :func:`split_windows`: 512-token windows, stride 256, a leak-free train / held-out split;
- :func:`log_perplexity`: held-out ln PPL with strided scoring;
- :func:`save_compressed` / :func:`load_compressed`: a compressed model's replacement modules;
- :func:`load` (with :func:`save`, ``--save DIR``): a kept compressed model, safetensors + JSON;
  :func:`export_dense` bakes linear replacements into ``nn.Linear``; :func:`register` lets
  ``transformers.AutoModelForCausalLM.from_pretrained(folder)`` load a kept folder.
"""
from galinear.compress.auto import register
from galinear.compress.evaluate import log_perplexity, log_perplexity_direct
from galinear.compress.methods import METHODS, MethodSpec, build_module, count_parameters
from galinear.compress.models import LoadedModel, check_model, load_model
from galinear.compress.saving import export_dense, load, save
from galinear.compress.study import PAPER_SETS_NOTE, Study, StudyConfig, load_compressed, save_compressed
from galinear.compress.windows import Windows, split_windows, tokenize

__all__ = [
    "METHODS", "MethodSpec", "build_module", "count_parameters", "LoadedModel", "check_model", "load_model",
    "Study", "StudyConfig", "load_compressed", "save_compressed", "PAPER_SETS_NOTE", "Windows", "split_windows",
    "tokenize", "log_perplexity", "log_perplexity_direct", "load", "save", "export_dense",
    "register",
]
