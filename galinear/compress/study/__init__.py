"""Running a study: its settings, the orchestrator and the plain values it passes in (the captures
cache, the values of the fits), the fits of a layer set, ln PPL scoring, its units of work and their
folders, and the layer-by-layer bookkeeping.
"""
