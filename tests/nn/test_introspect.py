"""galinear.nn.introspect: planes and angles of a RotorLinear's rotors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from galinear.core.rotors import wedge  # noqa: E402
from galinear.nn import RotorLinear, RotorNetwork  # noqa: E402
from galinear.nn.introspect import planes, plot_angle_spectra, rotor_layers  # noqa: E402


def test_planes_of_known_bivectors():
    layer = RotorLinear(32, 16, chunk_size=16)  # Cl(4): k = 2 planes per rotor, P = 2 pairs
    with torch.no_grad():
        layer.left_bivectors.zero_()
        layer.left_bivectors[0, 0] = 0.3  # e12
        layer.left_bivectors[0, 5] = 0.1  # e34
        layer.right_bivectors.zero_()
        layer.right_bivectors[1, 1] = -0.2  # -e13
        layer.alpha.copy_(torch.tensor([0.5, -1.0]))
    listing = planes(layer)
    assert listing.n == 4 and listing.pairs == 2
    assert listing.input_chunk.tolist() == [0, 1] and listing.output_chunk.tolist() == [0, 0]
    assert np.allclose(listing.left_angles[0], [0.3, 0.1]) and np.allclose(listing.right_angles[1], [0.2, 0.0])
    assert np.allclose(listing.alpha, [0.5, -1.0])
    # each part is angle * u ^ w, and the parts sum to the layer's bivector
    for angles, pl, biv, source in [(listing.left_angles, listing.left_planes, listing.left_bivectors, layer.left_bivectors),
                                    (listing.right_angles, listing.right_planes, listing.right_bivectors, layer.right_bivectors)]:
        rebuilt = angles[..., None] * wedge(4, pl[..., 0, :], pl[..., 1, :])
        assert np.allclose(rebuilt, biv, atol=1e-12)
        assert np.allclose(biv.sum(axis=1), source.detach().double().numpy(), atol=1e-12)
    rows = list(listing.rows())
    assert len(rows) == 2 * 2 * 2 and rows[0]["rotation_degrees"] == pytest.approx(np.degrees(0.6))
    text = listing.table(limit=3)
    assert "e12" in text and "rows in all" in text


def test_rotor_layers_of_a_network(tmp_path):
    net = RotorNetwork(16, 16, hidden=16)
    layers = rotor_layers(net)
    assert layers and all(name.endswith("gadget") or "gadgets" in name for name in layers)
    single = RotorLinear(8, 8, double_rotor=False, alpha=False)
    listing = planes(single)
    assert listing.right_angles is None and np.all(listing.alpha == 1)
    with pytest.raises(TypeError, match="rotor_layers"):
        planes(net)
    pytest.importorskip("matplotlib")
    fig = plot_angle_spectra(net, tmp_path / "spectra.png")
    assert (tmp_path / "spectra.png").stat().st_size > 0 and len(fig.axes) == len(layers)
