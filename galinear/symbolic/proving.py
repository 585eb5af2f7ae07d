"""Deprecated name of :mod:`galinear.symbolic.proof_scripts`, the helpers of the proof scripts.

"prove" also names :func:`galinear.prove` (identities decided per signature) and the proof scripts
of :mod:`galinear.proofs`; import :mod:`galinear.symbolic.proof_scripts` instead. This module is
that module under its old name (the same object in ``sys.modules``).
"""
import sys

from galinear.symbolic import proof_scripts

sys.modules[__name__] = proof_scripts
