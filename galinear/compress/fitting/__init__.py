"""Fitting replacement projections: convergence, the objectives, closed forms, distillation,
activations captured at a layer and held-out regression error. Every gradient fit runs through the
optimiser loop :func:`galinear.lm.optimise.train`.
"""
