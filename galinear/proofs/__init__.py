"""Exact proofs about the maths galinear runs (sympy only), shipped with the package.

One module per identity. Each defines ``IDENTITY`` (one line), ``N_MIN``, ``N_DEFAULT`` and
``prove(n_max, log)``, proves its identity exactly for every n from ``N_MIN`` up to ``--n``
(symbolic coefficients and ``simplify(lhs - rhs) == 0``; where a fully symbolic proof is out of
reach the module says so and checks exactly with rational numbers), prints a short proof log
and exits non-zero on failure.

Run one: ``python -m galinear.proofs.exp_simple_bivector --n 4``.
Run all as a table: ``galinear verify [--n N] [--only NAME]`` (``make verify``); this works
from an installed package, no source checkout needed.
"""
