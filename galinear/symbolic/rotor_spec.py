"""Deprecated name of :mod:`galinear.symbolic.rotor_maths`, the one statement of the rotor maths.

"rotor_spec" also names the generated constants (``galinear/_generated/rotor_spec.py``) and their
proof (``galinear/proofs/rotor_spec.py``); import :mod:`galinear.symbolic.rotor_maths` instead.
This module is that module under its old name (the same object in ``sys.modules``).
"""
import sys

from galinear.symbolic import rotor_maths

sys.modules[__name__] = rotor_maths
