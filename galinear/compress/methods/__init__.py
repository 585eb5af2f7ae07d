"""The compression methods: their catalogue and names, parameter budgets and the projections they
target.
"""
