# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # A tour of galinear's algebra
#
# The steps of `galinear tour`, one cell each, with what each result should be. Run it as a
# script (`python docs/tour.py`) or open it as a notebook (`jupytext --to notebook docs/tour.py`).
# Every cell checks its result with an assertion, so a run that finishes is a run that agrees.

# %%
import numpy as np

from galinear import Algebra, MultiVector

rng = np.random.default_rng(0)
alg = Algebra(4)                      # Euclidean Cl(4): 16 coefficients in shortlex order
print(alg, alg.blade_names[:8])

# %% [markdown]
# ## Products
#
# The geometric product of two vectors is their inner product plus their outer product:
# u v = u . v + u ^ v.

# %%
u = alg.vector(rng.standard_normal(4))
v = alg.vector(rng.standard_normal(4))
inner = alg.scalar(float(alg.scalar_product(u, v)))
assert np.allclose(alg.gp(u, v), inner + alg.op(u, v))

# %% [markdown]
# ## exp, the invariant decomposition and log
#
# A bivector B of Cl(4) is the sum of at most two commuting simple bivectors (the invariant
# decomposition of Roelfs and De Keninck, arXiv:2107.03771); its exponential is the product of
# their exponentials, a rotor R with R ~R = 1, and log takes R back to B while the plane angles
# stay below pi.

# %%
coefficients = rng.standard_normal(alg.num_bivectors)
B = alg.bivector(coefficients / np.linalg.norm(coefficients))
R = alg.exp(B)
assert np.allclose(alg.gp(R, alg.reverse(R)), alg.scalar(1.0))
parts = alg.decompose(B)
print("plane angles", parts.angles)
assert np.allclose(parts.bivectors.sum(axis=0), coefficients / np.linalg.norm(coefficients))
assert np.allclose(alg.log(R), B)

# %% [markdown]
# ## Sandwich maps are orthogonal matrices
#
# x -> R x ~S, for two rotors R and S, is a linear map of the 16 coefficients; its matrix is
# orthogonal.

# %%
S = alg.exp(alg.bivector(rng.standard_normal(alg.num_bivectors)))
M = alg.sandwich_matrix(R, S)
assert np.allclose(M @ M.T, np.eye(alg.dim))
x = rng.standard_normal(alg.dim)
assert np.allclose(M @ x, alg.gp(alg.gp(R, x), alg.reverse(S)))

# %% [markdown]
# ## The same with operators
#
# `MultiVector` holds the arrays and gives them the operators; `@` is the sandwich R x ~R.

# %%
X = MultiVector(alg, rng.standard_normal(alg.dim))
Rm = MultiVector(alg, R)
assert np.allclose((Rm @ X).values, (Rm * X * ~Rm).values)
print(Rm)

# %% [markdown]
# ## A boost and a screw motion
#
# In space-time Cl(3, 1) the exponential of e14 is a boost, cosh + sinh e14; in projective
# geometry Cl(3, 0, 1) the exponential of a rotation plane plus a translation is a screw motion,
# and log brings it back.

# %%
sta = Algebra(3, 1)
boost = sta.exp(sta.blade("e14", 1.5))
assert np.isclose(boost[0], np.cosh(1.5))

pga = Algebra(3, 0, 1)
bivector = pga.bivector(np.array([0.0, 0.0, 0.8, 0.5, 0.0, 0.0]))   # e12 e13 e14 e23 e24 e34
motor = pga.exp(bivector)
assert np.allclose(pga.exp(pga.log(motor)), motor)
print(MultiVector(pga, motor))

# %% [markdown]
# ## The command
#
# `galinear tour` runs these checks and more (against clifford and scipy, with tolerances in
# units of the last place, and the torch steps when torch is installed); it exits non-zero if one
# fails.

# %%
from galinear.commands import tour


class Arguments:
    n = 4
    seed = 0


assert tour.run(Arguments()) == 0
