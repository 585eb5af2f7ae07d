"""Offline data loaders: text corpora for language-model work and idx image files.

Import the submodules directly (``galinear.data.text``, ``galinear.data.idx``); each gives a
clear error with the install command when its data is missing.
"""
