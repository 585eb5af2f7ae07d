"""Training from scratch: rotor, dense and low-rank MLPs on Fashion-MNIST / MNIST (``galinear train-mlp``)
and small decoder-only language models with rotor, Givens, Kronecker-sum, low-rank or Monarch projections
(``galinear train-lm``).

- :mod:`galinear.train.config`: :class:`MLPConfig` and :class:`TrainConfig`, whose defaults are
  those of ``galinear train-mlp`` (plain Python, no torch import);
- :mod:`galinear.train.models`: :func:`build_mlp`, :func:`count_parameters`;
- :mod:`galinear.train.loop`: :func:`train_classifier` (atomic, resumable per-epoch checkpoints);
- :mod:`galinear.train.report`: markdown table, JSON summary and accuracy plot over seeds;
- :mod:`galinear.train.run_folder`: the run folder (check, resume, read back) shared with
  ``galinear train-lm``; both commands train through the optimiser loop of
  :mod:`galinear.optim.loop` (AdamW under a warm-up and cosine schedule);
- :mod:`galinear.train.lm`, :mod:`galinear.train.lm_config`, :mod:`galinear.train.lm_loop` and
  :mod:`galinear.train.lm_report`: the transformer of ``galinear train-lm``, its settings, its
  resumable training loop and its report.

The CPU cost of one training step, every sandwich backend side by side, is measured by
``benchmarks/bench_mlp_step.py`` (``make bench-mlp``).
"""
