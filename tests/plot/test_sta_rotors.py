"""STA and rotor pictures: the boost and the planes read back are right, and each drawing runs;
matplotlib is imported only when a picture is drawn."""
import subprocess
import sys

import numpy as np
import pytest

from galinear import Algebra
from galinear.core.rotors import wedge
from galinear.plot import (INSTALL_HINT, draw_bivector_matrix, draw_boost_diagram, draw_light_cone_boost,
                           draw_rotor_angles, draw_rotor_planes, rotors, sta)


@pytest.mark.parametrize("signature", [(3, 1), (1, 3)])
def test_boost_keeps_the_light_cone_and_tilts_the_time_axis(signature):
    alg = Algebra(*signature)
    R = sta.boost(alg, 0.9, direction=[0.0, 1.0, 0.0])
    t, xyz = sta.split(R @ sta.event(alg, 1.0, np.zeros(3)))
    np.testing.assert_allclose([t, *xyz], [np.cosh(0.9), 0.0, np.sinh(0.9), 0.0], atol=1e-12)
    k = sta.null_directions(alg, 12)
    moved = R @ k
    np.testing.assert_allclose(moved.scalar_product(moved), 0.0, atol=1e-12)  # null stays null
    t1, x1 = sta.split(moved)
    assert np.all(t1 > 0)  # the future cone stays the future cone
    # aberration: after the boost more rays point along +y than before
    assert np.sum(x1[:, 1] / t1 > 0.5) > np.sum(sta.split(k)[1][:, 1] > 0.5)


def test_sta_drawings_return_their_axes():
    R = sta.boost(Algebra(3, 1), 0.8)
    ax = draw_light_cone_boost(R, rays=8)
    assert ax.name == "3d" and "0.80" in ax.get_title()
    assert draw_boost_diagram(R).get_xlabel() == "x"


def _known_bivectors(rng):
    """Two Cl(4) bivectors with orthonormal planes and known angles (0.7, 0.2) and (0.45, 0.05)."""
    angles = np.array([[0.7, 0.2], [0.45, 0.05]])
    frames = [np.linalg.qr(rng.standard_normal((4, 4)))[0] for _ in range(2)]
    parts = np.stack([[angles[p, j] * wedge(4, frames[p][:, 2 * j], frames[p][:, 2 * j + 1]) for j in range(2)]
                      for p in range(2)])
    return angles, parts


def test_rotor_planes_of_bivectors(rng):
    angles, parts = _known_bivectors(rng)
    data = rotors.rotor_planes(parts.sum(axis=1))
    np.testing.assert_allclose(data.angles, angles, atol=1e-12)
    np.testing.assert_allclose(data.bivectors, parts, atol=1e-12)
    np.testing.assert_allclose(data.turns_degrees, np.degrees(2 * angles))
    A = data.matrices[0]
    np.testing.assert_allclose(A, -A.T)
    alg = Algebra(4)
    from galinear import MultiVector

    same = rotors.rotor_planes(MultiVector.bivector(alg, parts.sum(axis=1)))
    np.testing.assert_allclose(same.angles, angles, atol=1e-12)
    ax = draw_rotor_angles(parts.sum(axis=1))
    heights = sorted(round(p.get_height(), 9) for p in ax.patches)
    np.testing.assert_allclose(heights, sorted(np.degrees(2 * angles).ravel().round(9)))
    assert draw_rotor_planes(parts.sum(axis=1), index=1).name == "polar"
    assert draw_bivector_matrix(parts.sum(axis=1)).images


def test_rotor_planes_of_a_rotor_layer(rng):
    torch = pytest.importorskip("torch")
    from galinear.nn import RotorLinear

    layer = RotorLinear(32, 16, chunk_size=16).double()  # Cl(4): two chunk pairs
    angles, parts = _known_bivectors(rng)
    with torch.no_grad():
        layer.left_bivectors.copy_(torch.tensor(parts.sum(axis=1)))
    data = rotors.rotor_planes(layer)
    np.testing.assert_allclose(data.angles, angles, atol=1e-10)
    assert data.labels[1] == "1: in 1 -> out 0"
    assert draw_rotor_angles(layer, side="right").get_title().startswith("right")


def test_import_galinear_does_not_import_matplotlib():
    code = ("import sys, galinear, galinear.plot; from galinear import Algebra; from galinear.plot import pga; "
            "pga.coordinates(pga.point(Algebra(3, 0, 1), [1.0, 2.0, 3.0])); print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_matplotlib_names_the_extra(monkeypatch):
    import sys as _sys

    monkeypatch.setitem(_sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError) as info:
        draw_boost_diagram(sta.boost(Algebra(3, 1), 0.5))
    assert str(info.value) == INSTALL_HINT
    assert "pip install 'galinear[plot]'" in INSTALL_HINT and "\n" not in INSTALL_HINT
