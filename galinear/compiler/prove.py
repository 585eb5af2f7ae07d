"""Deprecated module path of :mod:`galinear.compiler.identities` (identities decided per signature).

``galinear.compiler.prove`` is the function :func:`galinear.prove`; "prove" also names the helpers
of the proof scripts (:mod:`galinear.symbolic.proof_scripts`) and the proofs themselves
(:mod:`galinear.proofs`). This module is :mod:`galinear.compiler.identities` under its old name
(the same object in ``sys.modules``); ``galinear/compiler/__init__.py`` loads it before binding the
function, so importing it later leaves ``galinear.compiler.prove`` the function.
"""
import sys

from galinear.compiler import identities

sys.modules[__name__] = identities
