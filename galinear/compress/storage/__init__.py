"""What a study keeps on disk: checkpoints written atomically, the paths of its cache and results
(Store), the kept model-folder format, tensor checks and the transformers auto class.
"""
