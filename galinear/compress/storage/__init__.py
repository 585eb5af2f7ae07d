"""What a study keeps on disk: the fit cache (Store), kept model folders, tensor checks and the
transformers auto class.
"""
