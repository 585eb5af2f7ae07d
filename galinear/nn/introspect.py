r"""What a rotor layer learned: the planes and angles of every rotor of a :class:`RotorLinear`.

Each chunk pair p = j I + i of a :class:`~galinear.nn.rotor.RotorLinear` maps input chunk i to
output chunk j by :math:`x \mapsto \alpha_p R_p x \tilde S_p` with :math:`R_p = \exp B_p`,
:math:`S_p = \exp C_p` in Cl(n), c = 2**n. The invariant decomposition (the exact method of
:meth:`galinear.Algebra.decompose`) splits each bivector into k = floor(n/2) simple parts
:math:`\theta_j\, u_j \wedge w_j` on orthogonal planes; :func:`planes` lists them. The rotor
:math:`\exp(\theta\, u \wedge w)` turns the vectors of Cl(n) by :math:`2\theta` in the plane
(u, w) under the single sandwich :math:`R x \tilde R`.

    >>> from galinear.nn import RotorLinear
    >>> from galinear.nn.introspect import planes
    >>> listing = planes(RotorLinear(16, 16, chunk_size=8))
    >>> print(listing.table(limit=2))   # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from galinear._extras import missing_extra

__all__ = ["RotorPlanes", "planes", "rotor_layers", "plot_angle_spectra"]


@dataclass
class RotorPlanes:
    r"""The invariant planes of one RotorLinear's rotors (numpy arrays, float64).

    Attributes
    ----------
    n : int
        Chunks are multivectors of Cl(n) (chunk size 2**n).
    input_chunk, output_chunk : ndarray (P,)
        Chunk indices (i, j) of each pair p = j I + i.
    alpha : ndarray (P,)
        The pair weights (ones when the layer has none).
    left_angles, right_angles : ndarray (P, k)
        :math:`\theta_j = |b_j|` of :math:`B_p` and :math:`C_p`, decreasing (the sandwich turns
        vectors by :math:`2\theta_j`); right ones None for a single-rotor layer.
    left_planes, right_planes : ndarray (P, k, 2, n)
        Orthonormal (u_j, w_j) with :math:`b_j = \theta_j\, u_j \wedge w_j` (unspecified where
        :math:`\theta_j = 0`).
    left_bivectors, right_bivectors : ndarray (P, k, C(n, 2))
        The simple parts themselves (they sum to the layer's bivector).
    """

    n: int
    input_chunk: np.ndarray
    output_chunk: np.ndarray
    alpha: np.ndarray
    left_angles: np.ndarray
    left_planes: np.ndarray
    left_bivectors: np.ndarray
    right_angles: np.ndarray | None = None
    right_planes: np.ndarray | None = None
    right_bivectors: np.ndarray | None = None

    @property
    def pairs(self) -> int:
        return int(self.alpha.shape[0])

    def rows(self):
        """One dict per (pair, side, plane): pair, input/output chunk, side, plane index,
        angle, rotation (2 angle, degrees), u, w, alpha."""
        sides = [("left", self.left_angles, self.left_planes)]
        if self.right_angles is not None:
            sides.append(("right", self.right_angles, self.right_planes))
        for p in range(self.pairs):
            for side, angles, planes_ in sides:
                for j in range(angles.shape[-1]):
                    yield {
                        "pair": p, "input_chunk": int(self.input_chunk[p]), "output_chunk": int(self.output_chunk[p]),
                        "side": side, "plane": j, "angle": float(angles[p, j]),
                        "rotation_degrees": float(np.degrees(2 * angles[p, j])),
                        "u": planes_[p, j, 0], "w": planes_[p, j, 1], "alpha": float(self.alpha[p]),
                    }

    def table(self, limit: int | None = 20, digits: int = 3) -> str:
        """A plain-text table of :meth:`rows` (the first ``limit`` rows; None for all).

        Each plane is written as the unit bivector :math:`u \\wedge w` by its two largest
        coefficients, e.g. ``+0.98 e13 -0.12 e24``.
        """
        from galinear.blades import bivector_pairs

        pairs = bivector_pairs(self.n)
        lines = ["pair  in  out  side   plane  angle (rad)  turn (deg)  alpha    unit bivector (largest terms)"]
        for count, row in enumerate(self.rows()):
            if limit is not None and count >= limit:
                lines.append(f"... ({sum(1 for _ in self.rows())} rows in all)")
                break
            unit = row["u"][pairs[:, 0]] * row["w"][pairs[:, 1]] - row["u"][pairs[:, 1]] * row["w"][pairs[:, 0]]
            order = np.argsort(-np.abs(unit))[:2]
            terms = " ".join(f"{unit[m]:+.2f} e{pairs[m, 0] + 1}{pairs[m, 1] + 1}" for m in order if abs(unit[m]) > 0)
            lines.append(
                f"{row['pair']:>4} {row['input_chunk']:>3} {row['output_chunk']:>4}  {row['side']:<5}  "
                f"{row['plane']:>5}  {row['angle']:>11.{digits}f}  {row['rotation_degrees']:>10.1f}  "
                f"{row['alpha']:>+6.3f}   {terms}"
            )
        return "\n".join(lines)


def _as_numpy(tensor) -> np.ndarray:
    return tensor.detach().to("cpu").double().numpy()


def planes(layer) -> RotorPlanes:
    """The planes and angles of every rotor of a :class:`~galinear.nn.rotor.RotorLinear`.

    Reads the layer's bivectors (no forward pass, no state change) and decomposes them with
    :meth:`galinear.Algebra.decompose` (exact method) in float64.
    """
    from galinear.core import Algebra
    from galinear.nn.rotor import RotorLinear

    if not isinstance(layer, RotorLinear):
        raise TypeError(
            f"planes() needs a RotorLinear, got {type(layer).__name__}; for a model use "
            f"rotor_layers(model) to list its RotorLinear layers"
        )
    n = layer.n
    alg = Algebra(n)
    P = layer.pairs
    I = layer.input_chunks
    index = np.arange(P)

    def split(bivectors):
        b = _as_numpy(bivectors)
        if n < 2:
            k = 0
            return np.zeros((P, k)), np.zeros((P, k, 2, n)), np.zeros((P, k, 0))
        dec = alg.decompose(alg.bivector(b))
        return dec.angles, dec.planes, dec.bivectors

    la, lp, lb = split(layer.left_bivectors)
    out = RotorPlanes(
        n=n, input_chunk=index % I, output_chunk=index // I,
        alpha=_as_numpy(layer.alpha) if layer.alpha is not None else np.ones(P),
        left_angles=la, left_planes=lp, left_bivectors=lb,
    )
    if getattr(layer, "right_bivectors", None) is not None:
        out.right_angles, out.right_planes, out.right_bivectors = split(layer.right_bivectors)
    return out


def rotor_layers(module) -> dict:
    """``{name: RotorPlanes}`` for every RotorLinear inside ``module`` (itself included)."""
    from galinear.nn.rotor import RotorLinear

    return {name or "(module)": planes(m) for name, m in module.named_modules() if isinstance(m, RotorLinear)}


def plot_angle_spectra(module, path=None, bins: int = 40):
    """Histogram of the rotation angles 2 theta (degrees) per RotorLinear layer (needs matplotlib).

    Returns the matplotlib figure; saves it to ``path`` when given.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise missing_extra(error, "plot_angle_spectra") from None
    layers = rotor_layers(module)
    if not layers:
        raise ValueError(f"{type(module).__name__} holds no RotorLinear layer")
    fig, axes = plt.subplots(len(layers), 1, figsize=(6, 1.8 * len(layers) + 0.6), squeeze=False)
    for ax, (name, listing) in zip(axes[:, 0], layers.items()):
        for side, angles in (("left", listing.left_angles), ("right", listing.right_angles)):
            if angles is not None and angles.size:
                ax.hist(np.degrees(2 * angles.reshape(-1)), bins=bins, alpha=0.6, label=side)
        ax.set_title(f"{name} (Cl({listing.n}), {listing.pairs} chunk pairs)", fontsize=9)
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("rotation angle 2θ of each invariant plane (degrees)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
