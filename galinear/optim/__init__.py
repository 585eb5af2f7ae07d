"""The optimiser loop of every gradient fit and training run, and its thread governor.

- :mod:`galinear.optim.loop`: :func:`~galinear.optim.loop.train`, the loop that every gradient fit
  of ``galinear compress`` and the runs of ``galinear train-mlp`` and ``galinear train-lm`` go
  through, with its optimisers (:func:`~galinear.optim.loop.make_optimizer`), warm-up and cosine
  schedule, mini-batches (:class:`~galinear.optim.loop.Batches`) and stopping rule
  (:class:`~galinear.optim.loop.Plateau`);
- :mod:`galinear.optim.threads`: :class:`~galinear.optim.threads.ThreadGovernor`, the loop's thread
  count chosen from its own step times (``--threads auto``).

torch loads on the first call that needs it, not on import.
"""
