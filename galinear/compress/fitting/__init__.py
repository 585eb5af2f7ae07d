"""Fitting replacement projections: the projection fit, convergence, the objectives, closed forms,
distillation, the seeds of the fits, activations captured at a layer, model surgery (replacements
swapped in, frozen, installed) and held-out regression error. Every gradient fit runs through the
optimiser loop :func:`galinear.optim.loop.train`.
"""
