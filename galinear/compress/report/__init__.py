"""Summaries of a study: JSON and markdown reports, loss curves, plots, Pareto fronts and the
verdict on the paper's claim.
"""
