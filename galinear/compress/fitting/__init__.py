"""Fitting replacement projections: the Adam loop, convergence, the objectives, closed forms,
distillation, activations captured at a layer and held-out regression error.
"""
