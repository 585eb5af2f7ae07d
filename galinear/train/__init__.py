"""Training loops: rotor, dense and low-rank MLPs on Fashion-MNIST / MNIST (``galinear train-mlp``).

- :mod:`galinear.train.config`: :class:`MLPConfig` and :class:`TrainConfig`, whose defaults are
  those of ``galinear train-mlp`` (plain Python, no torch import);
- :mod:`galinear.train.models`: :func:`build_mlp`, :func:`count_parameters`;
- :mod:`galinear.train.loop`: :func:`train_classifier` (atomic, resumable per-epoch checkpoints);
- :mod:`galinear.train.report`: markdown table, JSON summary and accuracy plot over seeds;
- :mod:`galinear.train.run_folder`: the run folder (check, resume, read back) shared with
  ``galinear train-lm``; both commands train through the optimiser loop of
  :mod:`galinear.lm.optimise` (AdamW under a warm-up and cosine schedule).

The CPU cost of one training step, every sandwich backend side by side, is measured by
``benchmarks/bench_mlp_step.py`` (``make bench-mlp``).
"""
