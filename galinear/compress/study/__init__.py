"""A study's parts below its orchestrator (:mod:`galinear.compress.orchestrator`): its settings, the
plain values the orchestrator passes in (the captures cache, the values of the fits), the fits of a
layer set, ln PPL scoring, its units of work and their folders, and the layer-by-layer bookkeeping.
"""
