"""Running a study: its settings, its units of work and their folders, the layer-by-layer
bookkeeping, and the captures and ln PPL scoring it is assembled from.
"""
