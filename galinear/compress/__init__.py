"""Layer-wise compression of a causal LM's linear projections by rotor networks and their baselines:
q/k/v by default, with ``--targets`` any of q, k, v, o, gate, up and down, in any layers up to all.

The paper's protocol (Pence, Yamada, Singh, "Composing Linear Layers from Irreducibles",
NeurIPS 2025, arXiv 2507.11688), with the leaks of its reference code fixed. Main entry points:

- :class:`StudyConfig`, :class:`Study`: capture, fit, evaluate and report, resumable;
- :func:`load` (with :func:`save`): a kept compressed model, a folder of safetensors + JSON, the
  one format a study writes (``<out>/models/`` or ``--save DIR``); :func:`load_compressed` installs
  one into a model already loaded and returns the replacement modules;
  :func:`export_dense` bakes linear replacements into ``nn.Linear``; :func:`register` lets
  ``transformers.AutoModelForCausalLM.from_pretrained(folder)`` load a kept folder.

Loading the model, its token windows and ln PPL are :mod:`galinear.lm`'s.

The orchestrator :class:`Study` is :mod:`~galinear.compress.orchestrator`'s; it sits above the
subpackages: :mod:`~galinear.compress.study` (the settings, the values of the fits, the captures
cache, the fits of a layer set, scoring, the units, folders and layer-by-layer bookkeeping),
:mod:`~galinear.compress.fitting` (the projection fit by Adam, convergence, objectives, closed
forms, distillation, the fits' seeds, activation capture, model surgery, held-out error),
:mod:`~galinear.compress.methods` (the catalogue, budgets and targets),
:mod:`~galinear.compress.storage` (checkpoints, the Store, the kept model folder's format and its
installing, the transformers auto class) and :mod:`~galinear.compress.report` (summaries, curves, plots, the Pareto front, the verdict).
"""
from galinear.compress.storage.transformers_auto import register
from galinear.compress.methods.catalogue import METHODS, MethodSpec, build_module, count_parameters
from galinear.compress.storage.folder_format import save
from galinear.compress.storage.install import export_dense, load, load_compressed
from galinear.compress.orchestrator import Study, StudyConfig
from galinear.compress.report.summary import PAPER_SETS_NOTE

__all__ = [
    "METHODS", "MethodSpec", "build_module", "count_parameters", "Study", "StudyConfig", "load_compressed",
    "PAPER_SETS_NOTE", "load", "save", "export_dense", "register",
]
