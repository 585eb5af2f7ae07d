"""The seeds of a study's fits: one torch seed per (study seed, layer, what is fitted), so a fit
depends on nothing fitted before it.
"""
from __future__ import annotations

#: The slots of :func:`fit_seed` besides q, k and v (0, 1, 2: their index in models.PROJECTIONS).
O_PROJ_SLOT = 7     # the o_proj refit of a layer
DISTILL_SLOT = 17   # the distillation stage of a whole compressed model (layer 0)


def fit_seed(seed: int, layer: int = 0, slot: int = 0) -> int:
    """The torch seed of one fit of a study: ``1_000_003 * seed + 131 * layer + slot``.

    ``seed`` is the study's seed (``--seeds``), ``layer`` the decoder layer fitted and ``slot``
    what is fitted in it: 0, 1, 2 for q, k and v (their index in ``models.PROJECTIONS``),
    :data:`O_PROJ_SLOT` for the o_proj refit, :data:`DISTILL_SLOT` (with layer 0) for the
    distillation stage. The value seeds both the module's initialisation (``torch.manual_seed``
    before it is built) and its batch order (:class:`galinear.optim.loop.Batches`), so a fit
    depends on nothing fitted before it. The multipliers are primes, large enough that every
    (seed, layer < 7600, slot < 131) has a seed of its own. The joint fit of a layer's q, k and v
    (:mod:`galinear.compress.fitting.objective`) draws its batch order from slot 0.
    """
    return 1_000_003 * seed + 131 * layer + slot


__all__ = ["DISTILL_SLOT", "O_PROJ_SLOT", "fit_seed"]
